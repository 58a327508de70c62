/*
 * The captures list (paged, filtered by state and label), the selected
 * capture and the line about it above its args.
 */
import { api, capturePath } from './api.mjs';
import { markTableRect, renderArgs, resetArgs } from './args_view.mjs';
import { $, h } from './dom.mjs';
import { countOf, fmtBytes, short, taskHex } from './format.mjs';
import { clearRecord } from './record_view.mjs';
import { isLive, state } from './state.mjs';
import { setError } from './status.mjs';

const CAPTURES_PAGE_SIZE = 100;

export async function loadCaptures() {
  const c = state.caps;
  const gen = ++c.gen;
  try {
    const resp = await api('v1/captures', {
      page_size: CAPTURES_PAGE_SIZE, page_token: c.pages.current(),
      state: c.filter.state, label: c.filter.label,
    });
    if (gen !== c.gen) return;
    c.items = Array.isArray(resp.captures) ? resp.captures : [];
    c.pages.next = resp.next_page_token || '';
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
  $('captures-prev').disabled = !c.pages.hasPrev;
  $('captures-next').disabled = !c.pages.hasNext;
  $('captures-page').textContent = `page ${c.pages.page}`;
  $('captures-note').textContent = c.items.length ? '' : 'No captures.';
  markTableRect();
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
export function selectCapture(name) {
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

export async function loadSummary() {
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
export function renderCaptureInfo() {
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
