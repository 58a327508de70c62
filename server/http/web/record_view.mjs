/*
 * The selected record: its header (task, stage, shape, strides, ...), the
 * picture of its view in the base tensor, and its values: a scalar, or a
 * tensor's 2-D slice as a heatmap with stats and a histogram (and, for an
 * inout arg, the after - before difference: diff_view.mjs).
 */
import { api, argPath } from './api.mjs';
import { flagBadges, funcLabel } from './args_view.mjs';
import { clearMarkers, drawCells, drawHistogram, updateRects } from './canvas.mjs';
import { heatColour, valueRange } from './colour.mjs';
import { cellAt, loadDiff } from './diff_view.mjs';
import { $, h } from './dom.mjs';
import { fmtBytes, fmtNum, fmtValue, scalarBits, scalarText, shapeStr, short, stageShort, taskHex, toNum } from './format.mjs';
import { chooseFit, clampIndex, viewGeometry, viewMapLayout } from './geometry.mjs';
import { writeHash } from './hash.mjs';
import { state } from './state.mjs';
import { errMsg, setError } from './status.mjs';
import { sameIndex } from './url_state.mjs';

/** Selects a record of the current capture (index: leading indices for rank > 2). */
export function selectRecord(id, { index = null } = {}) {
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

export function clearRecord() {
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

export async function loadRecord() {
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

function renderScalar(r) {
  showTensorPane('scalar');
  const bits = scalarBits(r), value = scalarText(r);
  $('scalar').replaceChildren(
    h('div', { class: 'scalar-value' }, `${short(r.dtype, 'DTYPE_')} value `,
      h('span', { id: 'scalar-value', class: 'mono', text: value })),
    h('div', {}, 'scalar_bits ', h('span', { class: 'mono', text: '0x' + bits.toString(16).padStart(16, '0') })));
}

/** The picture of the view in its base (geometry.mjs's viewMapLayout), or none. */
function renderViewMap(geo) {
  const box = $('geometry'), svg = $('view-map');
  delete svg.dataset.rect;
  const map = viewMapLayout(geo);
  if (!map) {
    box.hidden = true;
    svg.replaceChildren();
    for (const k of ['covered', 'cells', 'cols', 'perCell', 'cellPx']) delete svg.dataset[k];
    return;
  }
  const { cols, rows, px, cells, perCell } = map, NS = 'http://www.w3.org/2000/svg';
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
  for (let i = 0; i < cells; i++) {
    nodes.push(rect(i, map.covered[i] ? (i === map.startCell ? 'in start' : 'in') : 'out'));
  }
  svg.replaceChildren(...nodes);
  Object.assign(svg.dataset, { covered: String(map.filled), cells: String(cells), cols: String(cols), perCell: String(perCell), cellPx: String(px) });
  const what = perCell === 1 ? 'a cell per element' : `a cell per ${perCell} elements`;
  $('geometry-note').textContent =
    `the view's ${map.placed < map.total ? `first ${map.placed} of ${map.total}` : map.total} elements in its base: ` +
    `offsets ${geo.first}…${geo.last} of ≥ ${geo.extent} (${cols} a row, ${what}; filled: in the view)`;
  box.hidden = false;
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
  const index = clampIndex(lead, rec.index);
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
  if (r.role === 'ROLE_INOUT') await loadDiff(gen, name, rec.arg, fit, index, t, fetchTensor);
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

export function onSliceChange() {
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

export function onHeatmapMove(ev) {
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
