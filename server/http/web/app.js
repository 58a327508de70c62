/*
 * argsdump capture browser (app.js).
 *
 * Drives index.html against capture_server's JSON API (/v1/..., same origin):
 * a paged list of captures, a filtered and paged table of the selected
 * capture's records, and a view of the selected record: header, stats, a
 * heatmap of a 2-D slice, a histogram and, for inout args, the after - before
 * difference. The selection and the filters live in location.hash so a view
 * can be shared. Plain ES2020 without dependencies. API text always goes
 * into the DOM through textContent or text nodes, never as HTML.
 */
'use strict';

// ---- Constants --------------------------------------------------------------

const REFRESH_MS = 2000;            // the captures list and live pages refresh this often
const CAPTURES_PAGE_SIZE = 100;
const DEFAULT_ARGS_PAGE_SIZE = 100;
const MAX_ARGS_PAGE_SIZE = 1000;
const MAX_FIT = 65536;              // most grid cells asked of the tensor endpoint
const HEATMAP_SIDE = 512;           // the heatmap's longer side, CSS px
const HIST_W = 512, HIST_H = 120;
const TOKEN_KEY = 'argsdump.token';
const PARTNER_PAGES = 20;           // pages scanned for an inout arg's other stage

// Filter form fields, in the order they appear in the hash.
const FILTER_FIELDS = ['task_id', 'stage', 'role', 'kind', 'dtype', 'arg_index', 'func',
  'step', 'overflow', 'has_nonfinite', 'func_unknown', 'page_size'];
const CHOICES = {
  stage: ['before_dispatch', 'after_completion'],
  role: ['input', 'output', 'inout'],
  kind: ['tensor', 'scalar'],
  overflow: ['true', 'false'],
  has_nonfinite: ['true', 'false'],
};

// Colours, [r, g, b]. White is every canvas' background.
const BG = [255, 255, 255];
const COLOURS = {
  nan: [255, 0, 255],         // magenta
  posInf: [255, 0, 0],        // red
  negInf: [0, 64, 255],       // saturated blue (viridis has none)
  hatchA: [205, 205, 205],    // not captured: grey stripes
  hatchB: [150, 150, 150],
  diffNeg: [33, 102, 172],    // diff: blue - white - red
  diffPos: [178, 24, 43],
  diffPosInf: [255, 200, 0],
  diffNegInf: [0, 215, 215],
};
const HATCH = 'hatch';
const VIRIDIS_STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
const VIRIDIS = buildLut(VIRIDIS_STOPS, 256);

// ---- Small helpers -----------------------------------------------------------

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

/** Creates an element; props: class, text, dataset, on<event>, or attributes. */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = String(v);
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

function buildLut(stops, n) {
  const lut = [];
  for (let i = 0; i < n; i++) {
    const x = (i / (n - 1)) * (stops.length - 1), j = Math.min(Math.floor(x), stops.length - 2), f = x - j;
    lut.push(stops[j].map((c, k) => Math.round(c + (stops[j + 1][k] - c) * f)));
  }
  return lut;
}

const rgb = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;

// ---- Formatting --------------------------------------------------------------

/** A JSON value (number, "NaN", "Infinity", "-Infinity", decimal string) as a number; null stays null. */
function toNum(v) {
  if (v === null || v === undefined) return null;
  return typeof v === 'number' ? v : Number(v);
}

/** Floats to 6 significant digits (trailing zeros dropped); integers in full. */
function fmtNum(v) {
  const n = toNum(v);
  if (n === null) return '—';
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  if (Number.isInteger(n) && Math.abs(n) < 1e15) return String(n);
  return n.toPrecision(6).replace(/(\.\d*?)0+(?=$|e)/, '$1').replace(/\.(?=$|e)/, '');
}

function fmtBytes(v) {
  const n = Number(v || 0);
  if (!Number.isFinite(n)) return String(v);
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let x = n / 1024, u = 0;
  while (x >= 1024 && u < units.length - 1) { x /= 1024; u++; }
  return `${x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : x.toFixed(0)} ${units[u]}`;
}

/** A 64-bit id (decimal string, number or BigInt) as "0x" + 16 hex digits. */
function taskHex(v) {
  try { return '0x' + BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0'); } catch (_) { return String(v); }
}

/** "ROLE_INOUT" -> "inout"; stages become "before" / "after". */
function short(v, prefix) {
  const s = String(v ?? '');
  return (s.startsWith(prefix) ? s.slice(prefix.length) : s).toLowerCase();
}
const stageShort = (s) => ({ STAGE_BEFORE_DISPATCH: 'before', STAGE_AFTER_COMPLETION: 'after' })[s] || short(s, 'STAGE_');
const shapeStr = (shape) => (shape && shape.length ? shape.join('x') : '()');
const countOf = (v) => Number(v || 0);

function fmtValue(v) {
  if (v === null || v === undefined) return 'not captured';
  return fmtNum(v);
}

// ---- Status and errors -------------------------------------------------------

/** An API failure, already phrased as "STATUS: message". */
class ApiError extends Error {
  constructor(message, httpStatus = 0) { super(message); this.name = 'ApiError'; this.httpStatus = httpStatus; }
}

const errMsg = (e) => (e instanceof ApiError ? e.message : `INTERNAL: ${(e && e.message) || e}`);

// The current error of each source (captures, args, tensor, ...): a source's
// success clears only its own error. #status shows the latest one left.
const errors = new Map();

function setError(source, err) {
  errors.delete(source);
  if (err) errors.set(source, typeof err === 'string' ? err : errMsg(err));
  const all = [...errors.values()];
  const last = all.length ? all[all.length - 1] : '';
  const status = $('status');
  status.textContent = last;
  status.title = all.join('\n');
  status.classList.toggle('error', last !== '');
  document.body.dataset.error = last;
}

// ---- API ---------------------------------------------------------------------

let inFlight = 0;

function setBusy(delta) {
  inFlight += delta;
  document.body.dataset.state = inFlight > 0 ? 'loading' : 'idle';
}

// The bearer token, kept in sessionStorage (in memory only when storage is disabled).
let token = (() => { try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; } })();

function setToken(value) {
  token = value;
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
  } catch (_) { /* storage disabled: the token lasts until the page is reloaded */ }
}

function apiUrl(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') qs.append(k, String(v));
  }
  const q = qs.toString();
  return q ? `${path}?${q}` : path;
}

/** GETs a JSON object from the API; throws ApiError on any failure. */
async function api(path, params) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  setBusy(+1);
  try {
    let resp, text;
    try {
      resp = await fetch(apiUrl(path, params), { headers, cache: 'no-store' });
      text = await resp.text();
    } catch (e) {
      throw new ApiError(`UNAVAILABLE: network error: ${(e && e.message) || e}`);
    }
    let body, parsed = false;
    try { body = JSON.parse(text); parsed = true; } catch (_) { /* reported below */ }
    if (!resp.ok) {
      if (resp.status === 401) showAuth(true);
      if (parsed && body && typeof body === 'object' && (body.status || body.message)) {
        throw new ApiError(`${body.status || `HTTP_${resp.status}`}: ${body.message || ''}`, resp.status);
      }
      throw new ApiError(`HTTP ${resp.status}: ${text.slice(0, 200) || resp.statusText}`, resp.status);
    }
    if (!parsed || !body || typeof body !== 'object') {
      throw new ApiError(`INTERNAL: ${path}: the response is not a JSON object`, resp.status);
    }
    return body;
  } finally {
    setBusy(-1);
  }
}

const capturePath = (name) => `v1/captures/${enc(name)}`;
const argPath = (name, id) => `${capturePath(name)}/args/${enc(id)}`;

// ---- State -------------------------------------------------------------------

const state = {
  caps: { tokens: [''], next: '', items: [], gen: 0, filter: { state: '', label: '' } },
  capture: null,          // selected capture name
  summary: null,          // its CaptureSummary, when known
  kernels: new Map(),     // its kernel table: func_id -> Kernel (from GetCapture)
  query: emptyFilters(),  // the filters of the args table (as applied)
  args: { tokens: [''], next: '', items: [], gen: 0, loading: false, loaded: false },
  record: null,           // { id, arg: CapturedArg|null, index: number[]|null }
  recGen: 0,              // bumped whenever the record view starts over
  view: null,             // what the heatmap shows, for hovering
  diffView: null,         // what the diff canvas shows
};

function emptyFilters() {
  return Object.fromEntries(FILTER_FIELDS.map((k) => [k, '']));
}

const isLive = () => !!state.summary && state.summary.state === 'CAPTURE_STATE_LIVE';

// ---- Captures list -----------------------------------------------------------

async function loadCaptures() {
  const c = state.caps;
  const gen = ++c.gen;
  try {
    const resp = await api('v1/captures', {
      page_size: CAPTURES_PAGE_SIZE, page_token: c.tokens[c.tokens.length - 1],
      state: c.filter.state, label: c.filter.label,
    });
    if (gen !== c.gen) return;
    c.items = Array.isArray(resp.captures) ? resp.captures : [];
    c.next = resp.next_page_token || '';
    $('root-disk').textContent = resp.root_disk_bytes !== undefined ? `store ${fmtBytes(resp.root_disk_bytes)} on disk` : '';
    setError('captures', null);
    renderCaptures();
  } catch (e) {
    if (gen === c.gen) setError('captures', e);
  }
}

function renderCaptures() {
  const c = state.caps;
  $('captures').tBodies[0].replaceChildren(...c.items.map(captureRow));
  $('captures-prev').disabled = c.tokens.length <= 1;
  $('captures-next').disabled = !c.next;
  $('captures-page').textContent = `page ${c.tokens.length}`;
  $('captures-note').textContent = c.items.length ? '' : 'No captures.';
  markTableRect();
}

/** data-rect of the two tables and of their panes (CSS px in the window): whether each table fits. */
function markTableRect() {
  for (const el of [$('captures'), $('captures-pane'), $('args'), $('args-pane')]) {
    const r = el.getBoundingClientRect();
    el.dataset.rect = [r.left, r.top, r.width, r.height].map(Math.round).join(',');
  }
}

function captureRow(s) {
  const k = s.counters || {};
  const dropped = countOf(k.dropped_records);
  const causes = ['overwrite', 'ready_queue_full', 'free_queue_empty', 'arena_ack_timeout', 'flush_timeout', 'host_gone']
    .map((x) => `${x}: ${k[`dropped_${x}`] || 0}`).join(', ');
  const live = s.state === 'CAPTURE_STATE_LIVE';
  const overflow = k.first_overflow_task !== undefined
    ? (/^\d+$/.test(String(k.first_overflow_task)) ? taskHex(k.first_overflow_task) : String(k.first_overflow_task)) : '';
  const crash = s.device_crash
    ? (s.device_crash.signal_name || `exit ${s.device_crash.exit_status ?? '?'}`) : '';
  const labels = Object.entries(s.labels || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([lk, lv]) => h('span', { class: 'chip', text: `${lk}=${lv}` }));
  return h('tr', {
    dataset: { capture: s.capture }, tabindex: 0,
    class: s.capture === state.capture ? 'selected' : null,
    'aria-selected': s.capture === state.capture ? 'true' : 'false',
  },
  h('td', { class: 'mono name', text: s.capture }, s.recovered ? h('span', { class: 'badge', text: 'recovered' }) : null),
  h('td', {}, h('span', { class: `badge ${live ? 'live' : 'finished'}`, text: live ? 'live' : short(s.state, 'CAPTURE_STATE_') })),
  h('td', { text: short(s.level, 'DUMP_LEVEL_') }),
  h('td', { text: s.platform || '' }),
  h('td', { class: 'chips' }, ...labels),
  h('td', { class: 'num', text: s.records ?? '0' }),
  h('td', { class: 'num', text: fmtBytes(s.bin_bytes), title: `${s.bin_bytes ?? 0} bytes; ${fmtBytes(s.disk_bytes)} on disk` }),
  h('td', { class: `num${dropped > 0 ? ' loss' : ''}`, text: String(dropped), title: causes }),
  h('td', { class: 'mono', text: overflow, title: k.overflow_args ? `${k.overflow_args} overflow args` : null }),
  h('td', { class: crash ? 'loss' : '', text: crash, title: s.device_crash ? s.device_crash.description || null : null }),
  h('td', { text: s.attached ? 'yes' : 'no' }));
}

/** Selects a capture (null: none). Returns whether the selection changed. */
function selectCapture(name) {
  name = name || null;
  if (name === state.capture) return false;
  state.capture = name;
  state.summary = state.caps.items.find((s) => s.capture === name) || null;
  for (const src of ['capture', 'args', 'record', 'tensor', 'diff']) setError(src, null);
  resetArgs();
  clearRecord();
  for (const tr of $('captures').tBodies[0].rows) {
    const on = tr.dataset.capture === name;
    tr.classList.toggle('selected', on);
    tr.setAttribute('aria-selected', on ? 'true' : 'false');
  }
  renderCaptureInfo();
  state.kernels = new Map();
  if (name) loadSummary();  // the list's summaries carry no kernel table
  return true;
}

async function loadSummary() {
  const name = state.capture;
  if (!name) return;
  try {
    const s = await api(capturePath(name));
    if (name !== state.capture) return;
    state.summary = s;
    state.kernels = new Map((s.kernels || []).map((k) => [Number(k.func_id ?? 0), k]));
    setError('capture', null);
    renderCaptureInfo();
    if (state.args.items.length) renderArgs();
  } catch (e) {
    if (name === state.capture) setError('capture', e);
  }
}

/** One line about the selected capture above its args. */
function renderCaptureInfo() {
  $('args-capture').textContent = state.capture || '';
  const s = state.summary;
  if (!s) { $('capture-info').textContent = state.capture ? '' : 'no capture selected'; return; }
  const k = s.counters || {};
  const parts = [
    isLive() ? 'live' : 'finished',
    `${s.records ?? 0} records`,
    `before ${k.before_dispatch || 0} / after ${k.after_completion || 0}`,
    `in ${k.input_args || 0} / out ${k.output_args || 0} / inout ${k.inout_args || 0}`,
    `payload ${fmtBytes(k.payload_bytes)} (stored ${fmtBytes(k.payload_bytes_stored)}, ${k.deduplicated_args || 0} dedup)`,
    `truncated ${k.truncated_args || 0}`,
    `dropped ${k.dropped_records || 0}`,
  ];
  if (countOf(k.overflow_args)) parts.push(`overflow ${k.overflow_args}`);
  if (s.device_crash) parts.push(`crash: ${s.device_crash.description || s.device_crash.signal_name || 'device exited'}`);
  $('capture-info').textContent = parts.join(' · ');
}

// ---- Args table --------------------------------------------------------------

/** Parses a task id typed as "0x..." or decimal into "0x" + 16 hex digits ('' when empty). */
function parseTaskId(text) {
  const t = String(text || '').trim();
  if (!t) return '';
  if (!/^(0x[0-9a-f]+|\d+)$/i.test(t) || BigInt(t) >= 2n ** 64n) {
    throw new Error(`task_id "${t}" is not a 64-bit hex (0x...) or decimal number`);
  }
  return taskHex(t);
}

/** Validates and normalises raw filter strings; throws Error with a message. */
function normalizeFilters(raw) {
  const f = emptyFilters();
  f.task_id = parseTaskId(raw.task_id);
  for (const [k, allowed] of Object.entries(CHOICES)) {
    const v = String(raw[k] || '').trim().toLowerCase();
    if (v && !allowed.includes(v)) throw new Error(`${k} must be one of ${allowed.join(', ')}`);
    f[k] = v;
  }
  const dtype = String(raw.dtype || '').trim().toLowerCase().replace(/^dtype_/, '');
  if (dtype && !/^[a-z0-9]+$/.test(dtype)) throw new Error(`dtype "${dtype}" is not a dtype name`);
  f.dtype = dtype;
  // func: a kernel's name in the capture's kernel table, or its func id.
  const func = String(raw.func || '').trim();
  if (/^\d+$/.test(func)) {
    if (Number(func) > 0xffffffff) throw new Error('func must be a kernel name or a 32-bit func id');
    f.func = String(Number(func));
  } else {
    if (func.length > 128) throw new Error('func must be a kernel name (at most 128 characters) or a func id');
    f.func = func;
  }
  for (const k of ['arg_index', 'step']) {
    const v = String(raw[k] || '').trim();
    if (v && (!/^\d+$/.test(v) || Number(v) > 0xffffffff)) throw new Error(`${k} must be a 32-bit non-negative integer`);
    f[k] = v ? String(Number(v)) : '';
  }
  f.func_unknown = ['true', 'on', '1'].includes(String(raw.func_unknown || '').toLowerCase()) ? 'true' : '';
  const ps = String(raw.page_size || '').trim();
  if (ps && (!/^\d+$/.test(ps) || Number(ps) < 1)) throw new Error('page_size must be a positive integer');
  const size = ps ? Math.min(Number(ps), MAX_ARGS_PAGE_SIZE) : DEFAULT_ARGS_PAGE_SIZE;
  f.page_size = size === DEFAULT_ARGS_PAGE_SIZE ? '' : String(size);
  return f;
}

function readFilterForm() {
  const data = new FormData($('filters'));
  return Object.fromEntries(FILTER_FIELDS.map((k) => [k, data.get(k) ?? '']));
}

function fillFilterForm(f) {
  const form = $('filters');
  for (const k of FILTER_FIELDS) {
    const input = form.elements.namedItem(k);
    if (!input) continue;
    if (input.type === 'checkbox') input.checked = f[k] === 'true';
    else input.value = k === 'page_size' ? (f[k] || String(DEFAULT_ARGS_PAGE_SIZE)) : (f[k] || '');
  }
}

/**
 * The filter form's submit: validates the form, makes it the current query,
 * runs its first page and records it in the hash. Applying a hash goes through
 * here as well.
 */
function applyFilters() {
  let f;
  try {
    f = normalizeFilters(readFilterForm());
  } catch (e) {
    setError('filters', `INVALID_ARGUMENT: ${e.message}`);
    return false;
  }
  setError('filters', null);
  fillFilterForm(f);
  state.query = f;
  resetArgs();
  if (state.capture) loadArgsPage();
  writeHash();
  return true;
}

function queryParams(f) {
  const p = {};
  for (const k of FILTER_FIELDS) if (f[k] !== '') p[k] = f[k];
  return p;
}

/** Forgets the current page (and stale responses); leaves the query. */
function resetArgs() {
  const a = state.args;
  a.tokens = [''];
  a.next = '';
  a.items = [];
  a.gen++;
  a.loading = false;
  a.loaded = false;
  renderArgs();
}

/** Loads the current page of the current query; refresh keeps the rows meanwhile. */
async function loadArgsPage({ refresh = false } = {}) {
  const a = state.args, name = state.capture;
  if (!name) return;
  const gen = ++a.gen;
  a.loading = true;
  if (!refresh) { a.items = []; a.next = ''; renderArgs('Loading…'); }
  try {
    const resp = await api(`${capturePath(name)}/args`,
      { ...queryParams(state.query), page_token: a.tokens[a.tokens.length - 1] });
    if (gen !== a.gen) return;
    a.items = Array.isArray(resp.args) ? resp.args : [];
    a.next = resp.next_page_token || '';
    a.loaded = true;
    setError('args', null);
    renderArgs();
  } catch (e) {
    if (gen !== a.gen) return;
    setError('args', e);
    if (!refresh) renderArgs('The query failed.');
  } finally {
    if (gen === a.gen) a.loading = false;
  }
}

function argsPage(delta) {
  const a = state.args;
  if (delta > 0 && a.next) a.tokens.push(a.next);
  else if (delta < 0 && a.tokens.length > 1) a.tokens.pop();
  else return;
  loadArgsPage();
}

function renderArgs(note) {
  const a = state.args;
  $('args').tBodies[0].replaceChildren(...a.items.map(argRow));
  $('args-prev').disabled = a.tokens.length <= 1;
  $('args-next').disabled = !a.next;
  $('args-page').textContent = state.capture ? `page ${a.tokens.length} · ${a.items.length} rows` : '';
  let text = note;
  if (text === undefined) {
    if (!state.capture) text = 'Select a capture.';
    else if (!a.loaded || a.items.length) text = '';
    else if (a.next) text = 'This page is empty (the server bounds the work of each call); Next continues the scan.';
    else text = 'No records match.';
  }
  $('args-note').textContent = text;
  markTableRect();
}

function flagBadges(r) {
  const st = r.stats;
  const nonfinite = st ? countOf(st.nan) + countOf(st.pos_inf) + countOf(st.neg_inf) : 0;
  return [
    [r.truncated, 'truncated', 'the payload holds only part of the tensor'],
    [r.overwritten, 'overwritten', 'the buffer changed while it was copied'],
    [r.overflow, 'overflow', 'recorded by the overflow check'],
    [r.in_flight_snapshot, 'in-flight', 'a snapshot taken while the task was still running'],
    [nonfinite > 0 || r.nonfinite, 'non-finite', st ? `NaN ${st.nan || 0}, +Inf ${st.pos_inf || 0}, -Inf ${st.neg_inf || 0}` : 'a NaN or an Inf among the captured elements'],
    [r.arg_index_ambiguous, 'ambiguous', 'arg_index is ambiguous'],
  ].filter(([on]) => on).map(([, name, title]) => h('span', { class: `badge flag-${name}`, text: name, title }));
}

/** A task id that, when its column is narrow, breaks between its high and low words. */
function taskCell(hex) {
  if (!/^0x[0-9a-f]{16}$/.test(hex)) return h('td', { class: 'mono', text: hex });
  return h('td', { class: 'mono task' }, hex.slice(0, 10), h('wbr'), hex.slice(10));
}

/** A record's func ids with their kernels' names: "add (0)", "mix_sum (13),mix_prod (14)". */
function funcLabel(ids) {
  return (ids || []).map((id) => {
    const k = state.kernels.get(Number(id));
    return k ? `${k.name} (${id})` : String(id);
  }).join(',');
}

function argRow(ca) {
  const r = ca.record || {};
  const selected = !!state.record && state.record.id === ca.record_id;
  return h('tr', {
    dataset: { recordId: ca.record_id, taskId: taskHex(r.task_id ?? 0) }, tabindex: 0,
    class: selected ? 'selected' : null, 'aria-selected': selected ? 'true' : 'false',
  },
  h('td', { class: 'num', text: ca.record_id }),
  h('td', { class: 'num', text: ca.manifest_index ?? '' }),
  taskCell(taskHex(r.task_id ?? 0)),
  h('td', { text: stageShort(r.stage) }),
  h('td', { text: short(r.role, 'ROLE_') }),
  h('td', { text: short(r.kind, 'KIND_') }),
  h('td', { text: funcLabel(r.func_ids) }),
  h('td', { text: short(r.dtype, 'DTYPE_') }),
  h('td', r.kind === 'KIND_SCALAR' ? { class: 'mono', text: `= ${scalarText(r)}` } : { text: shapeStr(r.shape) }),
  h('td', { class: 'num', text: r.arg_index ?? 0 }),
  h('td', { class: 'num', text: r.step ?? 0 }),
  h('td', { class: 'num', text: fmtBytes(r.bin_size), title: `${r.bin_size ?? 0} bytes` }),
  h('td', { class: 'flags' }, ...flagBadges(r)));
}

// ---- Record view -------------------------------------------------------------

const sameIndex = (a, b) => (a || []).join(',') === (b || []).join(',');

function parseIndex(text) {
  if (!text) return null;
  const parts = String(text).split(',').map((s) => s.trim());
  return parts.every((s) => /^\d+$/.test(s)) ? parts.map(Number) : null;
}

/** Selects a record of the current capture (index: leading indices for rank > 2). */
function selectRecord(id, { index = null } = {}) {
  id = String(id);
  if (state.record && state.record.id === id && sameIndex(index, state.record.index)) return;
  const keep = state.record && state.record.id === id ? state.record.arg : null;
  state.record = { id, arg: keep || state.args.items.find((x) => x.record_id === id) || null, index };
  for (const tr of $('args').tBodies[0].rows) {
    const on = tr.dataset.recordId === id;
    tr.classList.toggle('selected', on);
    tr.setAttribute('aria-selected', on ? 'true' : 'false');
  }
  loadRecord();
}

function clearRecord() {
  state.record = null;
  state.view = state.diffView = null;
  state.recGen++;
  for (const src of ['record', 'tensor', 'diff']) setError(src, null);
  for (const tr of $('args').tBodies[0].rows) tr.classList.remove('selected');
  showTensorPane('empty');
}

/** Shows one of: empty, loading, tensor, scalar, error. Hidden canvases lose their markers. */
function showTensorPane(mode) {
  $('t-empty').hidden = mode !== 'empty';
  $('t-head').hidden = mode === 'empty';
  $('scalar').hidden = mode !== 'scalar';
  $('t-body').hidden = mode !== 'tensor';
  if (mode !== 'tensor') {
    state.view = state.diffView = null;
    $('hover').textContent = '';
    for (const id of ['heatmap', 'histogram', 'diff']) clearMarkers($(id));
  }
}

async function loadRecord() {
  const rec = state.record, name = state.capture;
  if (!rec || !name) return;
  const gen = ++state.recGen;
  for (const src of ['record', 'tensor', 'diff']) setError(src, null);
  showTensorPane('loading');
  $('t-title').textContent = `record ${rec.id}`;
  $('t-meta').textContent = 'Loading…';
  renderViewMap(null);  // the previous record's picture goes with its header
  $('t-flags').replaceChildren();
  $('payload-link').hidden = true;
  try {
    if (!rec.arg) {
      const arg = await api(argPath(name, rec.id));
      if (gen !== state.recGen) return;
      rec.arg = arg;
    }
  } catch (e) {
    if (gen !== state.recGen) return;
    setError('record', e);
    $('t-meta').textContent = errMsg(e);
    return;
  }
  renderRecordHeader(name, rec.arg);
  if ((rec.arg.record || {}).kind === 'KIND_SCALAR') renderScalar(rec.arg.record);
  else await loadTensor(gen);
}

function renderRecordHeader(name, ca) {
  const r = ca.record || {};
  $('t-title').textContent = `record ${ca.record_id}`;
  const items = [
    ['task', taskHex(r.task_id ?? 0), 'mono'], ['stage', stageShort(r.stage)], ['role', short(r.role, 'ROLE_')],
    ['kind', short(r.kind, 'KIND_')], ['dtype', short(r.dtype, 'DTYPE_')],
  ];
  const geo = r.kind !== 'KIND_SCALAR' ? viewGeometry(r) : null;
  if (geo) {
    items.push(['shape', shapeStr(r.shape)], ['strides', `(${geo.strides.join(', ')})`],
      ['start_offset', geo.start], ['contiguous', r.is_contiguous ? 'yes' : 'no'],
      ['base', `≥ ${geo.extent} elements (${geo.first}…${geo.last})`]);
    items.push(['bin_size', `${fmtBytes(r.bin_size)} of ${fmtBytes(r.logical_bytes)}`], ['numel', r.numel ?? 0]);
  }
  items.push(['manifest', ca.manifest_index ?? '—'], ['func', funcLabel(r.func_ids) || '—'],
    ['arg', r.arg_index ?? 0], ['step', r.step ?? 0], ['thread', r.device_thread ?? 0]);
  $('t-meta').replaceChildren(...items.map(([k, v, cls]) =>
    h('span', { class: 'kv', dataset: { key: k } }, h('span', { class: 'k', text: k }), h('span', { class: `v ${cls || ''}`, text: String(v) }))));
  renderViewMap(geo);
  $('t-flags').replaceChildren(...flagBadges(r));
  const link = $('payload-link');
  link.hidden = r.kind === 'KIND_SCALAR';
  link.href = `${argPath(name, ca.record_id)}/payload`;
  link.setAttribute('download', `${name}-record${ca.record_id}.bin`);
}

/**
 * A scalar's bits, and its value as the server read it (scalar_value: the
 * manifest's JSON token, float16 and bfloat16 included; NaN and the
 * infinities as strings). 64-bit integers come from the bits, exactly (a
 * JSON number past 2^53 would round).
 */
function scalarBits(r) {
  try { return BigInt.asUintN(64, BigInt(r.scalar_bits || '0')); } catch (_) { return 0n; }
}

function scalarText(r) {
  if (r.dtype === 'DTYPE_INT64') return String(BigInt.asIntN(64, scalarBits(r)));
  if (r.dtype === 'DTYPE_UINT64') return String(scalarBits(r));
  if (r.scalar_value !== undefined) return String(r.scalar_value);
  return '(no decoder for this dtype)';
}

function renderScalar(r) {
  showTensorPane('scalar');
  const bits = scalarBits(r), value = scalarText(r);
  $('scalar').replaceChildren(
    h('div', { class: 'scalar-value' }, `${short(r.dtype, 'DTYPE_')} value `,
      h('span', { id: 'scalar-value', class: 'mono', text: value })),
    h('div', {}, 'scalar_bits ', h('span', { class: 'mono', text: '0x' + bits.toString(16).padStart(16, '0') })));
}

// ---- The view's geometry ---------------------------------------------------------

const VIEW_MAP_CELLS = 4096;        // the most cells the picture of the base draws
const VIEW_MAP_COLS = 64;           // and the most in a row
const VIEW_MAP_ENUM = 1 << 20;      // the most view elements placed on it
const VIEW_MAP_CELL_PX = 9;         // the smallest cell (a pixel of it is the grid line)
const VIEW_MAP_WIDTH = 360;         // the width a small base's picture grows to

/**
 * Where a view's elements lie in its base tensor (element offsets, strides
 * in elements): the first and last offsets it touches, and the base's
 * smallest size that holds them (the record does not carry the base's own
 * size: at least this much of it exists). null for a view of no elements.
 */
function viewGeometry(r) {
  const shape = (r.shape || []).map(Number), strides = (r.strides || []).map(Number);
  const start = Number(r.start_offset || 0);
  if (shape.some((d) => d === 0)) return { shape, strides, start, first: start, last: start, extent: start, empty: true };
  let last = start;
  for (let i = 0; i < shape.length; i++) last += (shape[i] - 1) * (strides[i] || 0);
  return { shape, strides, start, first: start, last, extent: last + 1, empty: false };
}

/**
 * The base tensor as a grid of cells, the view's elements filled: drawn
 * for a view that is not the whole of a contiguous base (strided, or
 * starting past element 0). Rows are the second-last dimension's stride
 * when that fits, so a 2-D strided view looks like the matrix it cuts;
 * a base of more than VIEW_MAP_CELLS elements is drawn a block of elements
 * a cell (a cell is filled when the view touches any element of it).
 */
function renderViewMap(geo) {
  const box = $('geometry'), svg = $('view-map');
  delete svg.dataset.rect;
  if (!geo || geo.empty || (geo.start === 0 && isDense(geo))) {
    box.hidden = true;
    svg.replaceChildren();
    for (const k of ['covered', 'cells', 'cols', 'perCell', 'cellPx']) delete svg.dataset[k];
    return;
  }
  const rowStride = geo.shape.length >= 2 ? geo.strides[geo.strides.length - 2] : 0;
  let perCell = Math.max(1, Math.ceil(geo.extent / VIEW_MAP_CELLS));
  let cols;
  if (perCell === 1 && rowStride > 0 && rowStride <= VIEW_MAP_COLS) cols = rowStride;
  else cols = Math.min(VIEW_MAP_COLS, Math.ceil(geo.extent / perCell));
  const cells = Math.ceil(geo.extent / perCell), rows = Math.ceil(cells / cols);
  const covered = new Uint8Array(cells);
  // Every element's offset, the last dimension fastest; at most VIEW_MAP_ENUM of them.
  const n = geo.shape.length, idx = new Array(n).fill(0);
  let placed = 0, total = 1;
  for (const d of geo.shape) total *= d;
  for (let off = geo.start; placed < Math.min(total, VIEW_MAP_ENUM); placed++) {
    covered[Math.floor(off / perCell)] = 1;
    for (let k = n - 1; k >= 0; k--) {
      idx[k]++;
      off += geo.strides[k] || 0;
      if (idx[k] < geo.shape[k]) break;
      off -= idx[k] * (geo.strides[k] || 0);
      idx[k] = 0;
    }
  }
  // Cells of 9 to 24 px: a small base is drawn large enough to read.
  const px = Math.max(VIEW_MAP_CELL_PX, Math.min(24, Math.floor(VIEW_MAP_WIDTH / cols))), NS = 'http://www.w3.org/2000/svg';
  svg.setAttribute('width', String(cols * px + 1));
  svg.setAttribute('height', String(rows * px + 1));
  svg.setAttribute('viewBox', `0 0 ${cols * px + 1} ${rows * px + 1}`);
  const rect = (i, cls) => {
    const e = document.createElementNS(NS, 'rect');
    e.setAttribute('x', String((i % cols) * px + 1));
    e.setAttribute('y', String(Math.floor(i / cols) * px + 1));
    e.setAttribute('width', String(px - 1));
    e.setAttribute('height', String(px - 1));
    e.setAttribute('class', cls);
    return e;
  };
  const nodes = [];
  let filled = 0;
  for (let i = 0; i < cells; i++) {
    if (covered[i]) filled++;
    nodes.push(rect(i, covered[i] ? (i === Math.floor(geo.start / perCell) ? 'in start' : 'in') : 'out'));
  }
  svg.replaceChildren(...nodes);
  Object.assign(svg.dataset, { covered: String(filled), cells: String(cells), cols: String(cols), perCell: String(perCell), cellPx: String(px) });
  const what = perCell === 1 ? 'a cell per element' : `a cell per ${perCell} elements`;
  $('geometry-note').textContent =
    `the view's ${placed < total ? `first ${placed} of ${total}` : total} elements in its base: ` +
    `offsets ${geo.first}…${geo.last} of ≥ ${geo.extent} (${cols} a row, ${what}; filled: in the view)`;
  box.hidden = false;
}

/** True when the strides are the shape's row-major ones (dimensions of 1 aside). */
function isDense(geo) {
  let want = 1;
  for (let i = geo.shape.length - 1; i >= 0; i--) {
    if (geo.shape[i] !== 1 && geo.strides[i] !== want) return false;
    want *= geo.shape[i];
  }
  return true;
}

/** The 2-D slice a tensor's view shows: [rows, cols]. */
function sliceDims(shape) {
  if (!shape.length) return [1, 1];
  if (shape.length === 1) return [1, shape[0]];
  return shape.slice(-2);
}

/** Asks for no more grid cells than the heatmap can show at 1 px a cell. */
function chooseFit(shape) {
  const [rows, cols] = sliceDims(shape);
  return Math.max(64, Math.min(MAX_FIT, Math.min(rows, HEATMAP_SIDE) * Math.min(cols, HEATMAP_SIDE)));
}

function fetchTensor(name, id, fit, index) {
  return api(`${argPath(name, id)}/tensor`, { fit, index: index.length ? index.join(',') : '' });
}

/** Fetches and draws the selected record's tensor (and the inout diff). */
async function loadTensor(gen) {
  const rec = state.record, name = state.capture;
  const r = rec.arg.record || {};
  const shape = r.shape || [];
  const lead = shape.length > 2 ? shape.slice(0, -2) : [];
  const index = lead.map((dim, i) => Math.max(0, Math.min((rec.index || [])[i] || 0, dim - 1)));
  const fit = chooseFit(shape);
  renderSliceInputs(lead, index);
  let t;
  try {
    t = await fetchTensor(name, rec.id, fit, index);
    if (gen !== state.recGen) return;
    setError('tensor', null);
    showTensorPane('tensor');
    renderTensor(t, lead.length > 0);
  } catch (e) {
    if (gen !== state.recGen) return;
    setError('tensor', e);
    showTensorPane('error');
    return;
  }
  if (r.role === 'ROLE_INOUT') await loadDiff(gen, name, rec.arg, fit, index, t);
  else { $('diff-box').hidden = true; clearMarkers($('diff')); }
  updateRects();
}

function renderSliceInputs(lead, index) {
  const box = $('slice');
  if (!lead.length) { box.replaceChildren(); box.hidden = true; return; }
  box.hidden = false;
  box.replaceChildren(h('span', { class: 'muted', text: 'slice [' }),
    ...lead.flatMap((dim, i) => [
      h('label', { for: `slice-${i}`, class: 'muted', text: `d${i}` }),
      h('input', { id: `slice-${i}`, type: 'number', min: 0, max: dim - 1, step: 1, value: index[i], class: 'n', 'data-dim': i }),
      h('span', { class: 'muted', text: `/${dim}` })]),
    h('span', { class: 'muted', text: ', :, :]' }));
}

function onSliceChange() {
  const rec = state.record;
  if (!rec || !rec.arg) return;
  const inputs = [...$('slice').querySelectorAll('input')];
  const index = inputs.map((inp) => Math.max(0, Math.min(Number(inp.value) || 0, Number(inp.max))));
  inputs.forEach((inp, i) => { inp.value = index[i]; });
  if (sameIndex(index, rec.index)) return;
  rec.index = index;
  writeHash();
  loadTensor(++state.recGen);
}

/** The colour range: the stats' min/max, else the finite grid values'. */
function valueRange(t) {
  let lo = toNum(t.stats && t.stats.min), hi = toNum(t.stats && t.stats.max);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = Infinity; hi = -Infinity;
    for (const v of t.values || []) { const n = toNum(v); if (Number.isFinite(n)) { lo = Math.min(lo, n); hi = Math.max(hi, n); } }
    if (lo > hi) { lo = 0; hi = 1; }
  }
  return [lo, hi];
}

function renderTensor(t, sliced) {
  const gr = t.grid_rows || 0, gc = t.grid_cols || 0;
  const br = t.block_rows || 1, bc = t.block_cols || 1;
  const info = [`slice ${t.rows}x${t.cols}`];
  if (sliced) info.push(`at [${(t.index || []).join(', ')}, :, :]`);
  if (br > 1 || bc > 1) info.push(`shown as ${gr}x${gc} cells of ${br}x${bc} elements (block mean)`);
  info.push(`captured ${t.captured ?? 0} of ${(t.rows || 0) * (t.cols || 0)} elements`);
  $('grid-info').textContent = info.join(' · ');

  const st = t.stats || {};
  $('stats').replaceChildren(...[['count', st.count], ['min', st.min], ['max', st.max], ['mean', st.mean], ['l2', st.l2],
    ['nan', st.nan], ['+inf', st.pos_inf], ['-inf', st.neg_inf], ['zeros', st.zeros]]
    .map(([k, v]) => h('div', {}, h('dt', { text: k }), h('dd', { class: 'mono', text: fmtNum(v) }))));

  const [lo, hi] = valueRange(t);
  const values = t.values || [];
  const cells = values.map((v) => heatColour(toNum(v), lo, hi));
  const cell = drawCells($('heatmap'), gr, gc, cells);
  state.view = { t, cell, gr, gc, br, bc };
  $('legend-lo').textContent = fmtNum(lo);
  $('legend-hi').textContent = fmtNum(hi);

  let nanCells = 0, infCells = 0, missing = 0;
  for (const v of values) {
    if (v === null) missing++;
    else if (v === 'NaN') nanCells++;
    else if (v === 'Infinity' || v === '-Infinity') infCells++;
  }
  $('nonfinite').textContent = `elements: NaN ${st.nan || 0} · +Inf ${st.pos_inf || 0} · −Inf ${st.neg_inf || 0}` +
    ` — grid cells: ${nanCells} NaN, ${infCells} Inf, ${missing} not captured`;
  $('hover').textContent = 'Hover the heatmap for values.';
  drawHistogram($('histogram'), t.histogram);
}

function heatColour(n, lo, hi) {
  if (n === null) return HATCH;
  if (Number.isNaN(n)) return COLOURS.nan;
  if (n === Infinity) return COLOURS.posInf;
  if (n === -Infinity) return COLOURS.negInf;
  const f = hi > lo ? (n - lo) / (hi - lo) : 0.5;
  return VIRIDIS[Math.round(Math.max(0, Math.min(1, f)) * (VIRIDIS.length - 1))];
}

// ---- Canvases ------------------------------------------------------------------

function ctx2d(canvas) {
  return canvas.getContext('2d', { willReadFrequently: true });
}

function sizeCanvas(canvas, w, hgt) {
  canvas.width = w;
  canvas.height = hgt;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${hgt}px`;
  const ctx = ctx2d(canvas);
  ctx.imageSmoothingEnabled = false;
  ctx.fillStyle = rgb(BG);
  ctx.fillRect(0, 0, w, hgt);
  return ctx;
}

/** Integer cell size: the longer side about HEATMAP_SIDE px, at least 1 px a cell. */
const cellSize = (gr, gc) => Math.max(1, Math.floor(HEATMAP_SIDE / Math.max(gr, gc, 1)));

/** Paints a grid of colours (HATCH: grey stripes) at cellSize px a cell; returns the cell size. */
function drawCells(canvas, gr, gc, colours) {
  const cell = cellSize(gr, gc);
  const w = gc * cell, hgt = gr * cell;
  if (w > 32767 || hgt > 32767) throw new Error(`a ${gr}x${gc} grid is too large to draw`);
  const ctx = sizeCanvas(canvas, w, hgt);
  if (w > 0 && hgt > 0) {
    const img = ctx.createImageData(w, hgt), px = img.data;
    for (let y = 0, o = 0; y < hgt; y++) {
      const base = Math.floor(y / cell) * gc;
      for (let x = 0; x < w; x++, o += 4) {
        let c = colours[base + Math.floor(x / cell)] || COLOURS.hatchA;
        if (c === HATCH) c = ((x + y) >> 2) & 1 ? COLOURS.hatchA : COLOURS.hatchB;
        px[o] = c[0]; px[o + 1] = c[1]; px[o + 2] = c[2]; px[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
  }
  markDrawn(canvas);
  return cell;
}

function drawHistogram(canvas, hist) {
  const ctx = sizeCanvas(canvas, HIST_W, HIST_H);
  const padTop = 14, padBottom = 16, plotH = HIST_H - padTop - padBottom;
  const counts = ((hist && hist.counts) || []).map(Number);
  const peak = counts.reduce((m, c) => Math.max(m, c), 0);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#222';
  if (!peak) {
    ctx.textBaseline = 'middle';
    ctx.fillText('no finite values', 8, HIST_H / 2);
  } else {
    const bw = HIST_W / counts.length;
    ctx.fillStyle = '#3b6ea5';
    counts.forEach((c, i) => {
      if (!c) return;
      const bh = Math.max(1, Math.round((plotH * c) / peak));
      ctx.fillRect(Math.floor(i * bw), padTop + plotH - bh, Math.max(1, Math.floor(bw) - 1), bh);
    });
    ctx.fillStyle = '#999';
    ctx.fillRect(0, padTop + plotH, HIST_W, 1);
    ctx.fillStyle = '#222';
    ctx.textBaseline = 'bottom';
    ctx.textAlign = 'left';
    ctx.fillText(fmtNum(hist.min), 2, HIST_H - 1);
    ctx.textAlign = 'right';
    ctx.fillText(fmtNum(hist.max), HIST_W - 2, HIST_H - 1);
    ctx.textBaseline = 'top';
    ctx.fillText(`peak bin ${peak}`, HIST_W - 2, 1);
    ctx.textAlign = 'left';
    ctx.fillText(`${counts.length} bins`, 2, 1);
  }
  canvas.setAttribute('aria-label', peak ? `histogram of the finite values from ${fmtNum(hist.min)} to ${fmtNum(hist.max)}` : 'no finite values');
  markDrawn(canvas);
}

/** data-drawn: how many pixels differ from the white background. */
function markDrawn(canvas) {
  let n = 0;
  if (canvas.width > 0 && canvas.height > 0) {
    const d = ctx2d(canvas).getImageData(0, 0, canvas.width, canvas.height).data;
    for (let o = 0; o < d.length; o += 4) {
      if (d[o] !== BG[0] || d[o + 1] !== BG[1] || d[o + 2] !== BG[2] || d[o + 3] !== 255) n++;
    }
  }
  canvas.dataset.drawn = String(n);
}

function clearMarkers(canvas) {
  delete canvas.dataset.drawn;
  delete canvas.dataset.rect;
}

/** data-rect of each shown canvas: CSS px from the top-left with everything scrolled to the top. */
function updateRects() {
  for (const id of ['heatmap', 'histogram', 'diff', 'view-map']) {
    const c = $(id);
    const drawn = id === 'view-map' ? c.dataset.cells : c.dataset.drawn;
    if (!c.getClientRects().length || drawn === undefined) { delete c.dataset.rect; continue; }
    const r = c.getBoundingClientRect();
    let x = r.left + window.scrollX, y = r.top + window.scrollY;
    for (let p = c.parentElement; p && p !== document.body; p = p.parentElement) { x += p.scrollLeft; y += p.scrollTop; }
    c.dataset.rect = [x, y, r.width, r.height].map(Math.round).join(',');
  }
}

// ---- Inout diff ----------------------------------------------------------------

/** The other stage's record of an inout arg, preferring the same step and a completed copy. */
async function findPartner(name, ca) {
  const r = ca.record || {};
  const other = r.stage === 'STAGE_BEFORE_DISPATCH' ? 'after_completion' : 'before_dispatch';
  let token = '', best = null;
  const score = (x) => ((x.record.step === r.step) ? 2 : 0) + (x.record.in_flight_snapshot ? 0 : 1);
  for (let i = 0; i < PARTNER_PAGES; i++) {
    const resp = await api(`${capturePath(name)}/args`, {
      task_id: taskHex(r.task_id ?? 0), arg_index: r.arg_index ?? 0, role: 'inout', stage: other,
      page_size: 100, page_token: token,
    });
    for (const x of resp.args || []) {
      if (x.record_id === ca.record_id || !x.record || x.record.stage === r.stage) continue;
      if (!best || score(x) > score(best)) best = x;
    }
    token = resp.next_page_token || '';
    if (!token || (best && score(best) === 3)) break;
  }
  return best;
}

async function loadDiff(gen, name, ca, fit, index, tensor) {
  const box = $('diff-box');
  box.hidden = false;
  clearMarkers($('diff'));
  $('diff').hidden = true;
  $('diff-partner').textContent = '';
  $('diff-summary').textContent = 'Looking for the other stage…';
  try {
    const partner = await findPartner(name, ca);
    if (gen !== state.recGen) return;
    if (!partner) {
      $('diff-summary').textContent = 'The other stage of this inout arg is not in the capture.';
      setError('diff', null);
      return;
    }
    const other = await fetchTensor(name, partner.record_id, fit, index);
    if (gen !== state.recGen) return;
    const beforeFirst = (ca.record || {}).stage === 'STAGE_BEFORE_DISPATCH';
    $('diff-partner').textContent = `(with record ${partner.record_id}, ${stageShort(partner.record.stage)})`;
    drawDiff(beforeFirst ? tensor : other, beforeFirst ? other : tensor);
    setError('diff', null);
  } catch (e) {
    if (gen !== state.recGen) return;
    setError('diff', e);
    $('diff-summary').textContent = `No diff: ${errMsg(e)}`;
  }
}

/** after - before of one grid cell: 0 when equal, NaN when one is NaN, null when one is missing. */
function cellDiff(b, a) {
  if (a === null || b === null) return null;
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return 0;
  if (Number.isNaN(a) || Number.isNaN(b)) return NaN;
  return a - b;
}

function drawDiff(before, after) {
  const gr = before.grid_rows || 0, gc = before.grid_cols || 0;
  const canvas = $('diff');
  if (gr !== after.grid_rows || gc !== after.grid_cols) {
    $('diff-summary').textContent = `The grids differ (${gr}x${gc} before, ${after.grid_rows}x${after.grid_cols} after).`;
    return;
  }
  const n = gr * gc, diffs = new Array(n);
  let changed = 0, maxAbs = 0, nonfinite = 0, missing = 0;
  for (let i = 0; i < n; i++) {
    const d = cellDiff(toNum((before.values || [])[i]), toNum((after.values || [])[i]));
    diffs[i] = d;
    if (d === null) missing++;
    else if (d !== 0) {
      changed++;
      if (Number.isFinite(d)) maxAbs = Math.max(maxAbs, Math.abs(d)); else nonfinite++;
    }
  }
  const colours = diffs.map((d) => {
    if (d === null) return HATCH;
    if (d === 0) return BG;
    if (Number.isNaN(d)) return COLOURS.nan;
    if (d === Infinity) return COLOURS.diffPosInf;
    if (d === -Infinity) return COLOURS.diffNegInf;
    const s = 0.15 + 0.85 * Math.min(1, Math.abs(d) / (maxAbs || 1)), end = d > 0 ? COLOURS.diffPos : COLOURS.diffNeg;
    return BG.map((c, k) => Math.round(c + (end[k] - c) * s));
  });
  canvas.hidden = false;
  const cell = drawCells(canvas, gr, gc, colours);
  state.diffView = { before, after, diffs, cell, gr, gc };
  let text = `${changed} of ${n} grid cells changed; max |after-before| = ${fmtNum(maxAbs)}`;
  if (nonfinite) text += `; ${nonfinite} non-finite differences`;
  if (missing) text += `; ${missing} cells not captured in one of them`;
  $('diff-summary').textContent = text;
  $('diff-lo').textContent = fmtNum(-maxAbs);
  $('diff-hi').textContent = `+${fmtNum(maxAbs)}`;
}

// ---- Hovering --------------------------------------------------------------------

function cellAt(ev, v) {
  const r = ev.currentTarget.getBoundingClientRect();
  const col = Math.floor((ev.clientX - r.left) / v.cell), row = Math.floor((ev.clientY - r.top) / v.cell);
  return row >= 0 && col >= 0 && row < v.gr && col < v.gc ? [row, col] : null;
}

function onHeatmapMove(ev) {
  const v = state.view;
  const at = v && cellAt(ev, v);
  if (!at) return;
  const [row, col] = at;
  let text = `(${row}, ${col}) = ${fmtValue(v.t.values[row * v.gc + col])}`;
  if (v.br > 1 || v.bc > 1) {
    const r1 = Math.min(v.t.rows, (row + 1) * v.br) - 1, c1 = Math.min(v.t.cols, (col + 1) * v.bc) - 1;
    text += `  (elements rows ${row * v.br}–${r1}, cols ${col * v.bc}–${c1})`;
  }
  $('hover').textContent = text;
}

function onDiffMove(ev) {
  const v = state.diffView;
  const at = v && cellAt(ev, v);
  if (!at) return;
  const i = at[0] * v.gc + at[1];
  $('hover').textContent = `(${at[0]}, ${at[1]}) before = ${fmtValue(v.before.values[i])}, ` +
    `after = ${fmtValue(v.after.values[i])}, after − before = ${v.diffs[i] === null ? 'not captured' : fmtNum(v.diffs[i])}`;
}

// ---- Location hash -----------------------------------------------------------------

function writeHash() {
  const parts = [];
  const add = (k, v) => { if (v !== '' && v !== null && v !== undefined) parts.push(`${k}=${enc(v).replace(/%2C/gi, ',')}`); };
  add('capture', state.capture);
  for (const k of FILTER_FIELDS) add(k, state.query[k]);
  if (state.record) {
    add('record', state.record.id);
    if (state.record.index && state.record.index.length) add('index', state.record.index.join(','));
  }
  const hash = parts.length ? `#${parts.join('&')}` : '';
  if (hash !== location.hash) history.replaceState(null, '', hash || location.pathname + location.search);
}

/** Applies the hash: capture, then the filters (as a form submit would), then the record. */
function applyHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ''));
  if (p.has('token')) {
    setToken(p.get('token'));
    $('token').value = p.get('token');
    showAuth(true);
  }
  selectCapture(p.get('capture'));
  fillFilterForm(Object.fromEntries(FILTER_FIELDS.map((k) => [k, p.get(k) || ''])));
  applyFilters();
  const rec = p.get('record');
  if (rec && state.capture) selectRecord(rec, { index: parseIndex(p.get('index')) });
  else if (state.record) clearRecord();
  writeHash();
}

// ---- Refresh, auth and wiring ------------------------------------------------------

/** The 2 s refresh: the captures list, the selected capture, and live first pages. */
async function tick() {
  try {
    await loadCaptures();
    if (state.capture) {
      const wasLive = isLive();
      const listed = state.caps.items.find((s) => s.capture === state.capture);
      if (listed) {
        state.summary = listed;
        setError('capture', null);
        renderCaptureInfo();
      } else {
        await loadSummary();
      }
      const a = state.args;
      // One more run after a capture finishes picks up its manifest indices.
      if ((wasLive || isLive()) && a.tokens.length === 1 && a.loaded && !a.loading) await loadArgsPage({ refresh: true });
    }
  } catch (e) {
    setError('refresh', e);
  } finally {
    setTimeout(tick, REFRESH_MS);
  }
}

function showAuth(show) {
  $('auth').hidden = !show;
  if (show && !token) $('token').focus();
}

/** Re-runs everything shown, e.g. with a new token. */
function reloadAll() {
  errors.clear();
  setError('auth', null);
  loadCaptures();
  if (state.capture) loadSummary();
  applyFilters();
  if (state.record) loadRecord();
}

function onRowActivate(tbody, attr, fn) {
  const pick = (ev) => {
    const tr = ev.target.closest(`tr[${attr}]`);
    if (tr && tbody.contains(tr)) fn(tr);
  };
  tbody.addEventListener('click', pick);
  tbody.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(ev); }
  });
}

function init() {
  for (const sw of document.querySelectorAll('.swatch[data-colour]')) sw.style.background = rgb(COLOURS[sw.dataset.colour]);
  $('legend-bar').style.background = `linear-gradient(to right, ${VIRIDIS_STOPS.map(rgb).join(', ')})`;
  $('diff-bar').style.background = `linear-gradient(to right, ${rgb(COLOURS.diffNeg)}, ${rgb(BG)}, ${rgb(COLOURS.diffPos)})`;
  if (token) { $('token').value = token; showAuth(true); }

  onRowActivate($('captures').tBodies[0], 'data-capture', (tr) => {
    if (selectCapture(tr.dataset.capture)) { loadArgsPage(); writeHash(); }
  });
  onRowActivate($('args').tBodies[0], 'data-record-id', (tr) => {
    selectRecord(tr.dataset.recordId);
    writeHash();
  });
  $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); applyFilters(); });
  $('filters-reset').addEventListener('click', () => { fillFilterForm(emptyFilters()); applyFilters(); });
  $('args-next').addEventListener('click', () => argsPage(+1));
  $('args-prev').addEventListener('click', () => argsPage(-1));
  $('captures-next').addEventListener('click', () => {
    if (state.caps.next) { state.caps.tokens.push(state.caps.next); loadCaptures(); }
  });
  $('captures-prev').addEventListener('click', () => {
    if (state.caps.tokens.length > 1) { state.caps.tokens.pop(); loadCaptures(); }
  });
  const capFilters = $('capture-filters');
  const onCapFilters = (ev) => {
    ev.preventDefault();
    const data = new FormData(capFilters);
    state.caps.filter = { state: String(data.get('state') || ''), label: String(data.get('label') || '').trim() };
    state.caps.tokens = [''];
    loadCaptures();
  };
  capFilters.addEventListener('submit', onCapFilters);
  capFilters.addEventListener('change', onCapFilters);
  $('auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken($('token').value.trim());
    reloadAll();
  });
  $('slice').addEventListener('change', onSliceChange);
  $('heatmap').addEventListener('mousemove', onHeatmapMove);
  $('diff').addEventListener('mousemove', onDiffMove);
  window.addEventListener('hashchange', applyHash);
  window.addEventListener('resize', () => { updateRects(); markTableRect(); });
  window.addEventListener('unhandledrejection', (ev) => { ev.preventDefault(); setError('internal', ev.reason); });
  window.addEventListener('error', (ev) => setError('internal', `INTERNAL: ${ev.message}`));

  applyHash();
  tick();
}

init();
