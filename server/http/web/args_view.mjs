/*
 * The args table of the selected capture: the filter form applied as a
 * query, its pages, and a row per record (flags, func names from the
 * capture's kernel table).
 */
import { api, capturePath } from './api.mjs';
import { $, h } from './dom.mjs';
import { normalizeFilters, queryParams } from './filters.mjs';
import { fillFilterForm, readFilterForm } from './filter_form.mjs';
import { countOf, fmtBytes, scalarText, shapeStr, short, stageShort, taskHex } from './format.mjs';
import { writeHash } from './hash.mjs';
import { state } from './state.mjs';
import { setError } from './status.mjs';

/** data-rect of the two tables and of their panes (CSS px in the window): whether each table fits. */
export function markTableRect() {
  for (const el of [$('captures'), $('captures-pane'), $('args'), $('args-pane')]) {
    const r = el.getBoundingClientRect();
    el.dataset.rect = [r.left, r.top, r.width, r.height].map(Math.round).join(',');
  }
}

/**
 * The filter form's submit: validates the form, makes it the current query,
 * runs its first page and records it in the hash. Applying a hash goes through
 * here as well.
 */
export function applyFilters() {
  let f;
  try {
    f = normalizeFilters(readFilterForm($('filters')));
  } catch (e) {
    setError('filters', `INVALID_ARGUMENT: ${e.message}`);
    return false;
  }
  setError('filters', null);
  fillFilterForm($('filters'), f);
  state.query = f;
  resetArgs();
  if (state.capture) loadArgsPage();
  writeHash();
  return true;
}

/** Forgets the current page (and stale responses); leaves the query. */
export function resetArgs() {
  const a = state.args;
  a.pages.reset();
  a.items = [];
  a.gen++;
  a.loading = false;
  a.loaded = false;
  renderArgs();
}

/** Loads the current page of the current query; refresh keeps the rows meanwhile. */
export async function loadArgsPage({ refresh = false } = {}) {
  const a = state.args, name = state.capture;
  if (!name) return;
  const gen = ++a.gen;
  a.loading = true;
  if (!refresh) { a.items = []; a.pages.next = ''; renderArgs('Loading…'); }
  try {
    const resp = await api(`${capturePath(name)}/args`,
      { ...queryParams(state.query), page_token: a.pages.current() });
    if (gen !== a.gen) return;
    a.items = Array.isArray(resp.args) ? resp.args : [];
    a.pages.next = resp.next_page_token || '';
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

export function argsPage(delta) {
  const p = state.args.pages;
  if (!(delta > 0 ? p.forward() : delta < 0 && p.back())) return;
  loadArgsPage();
}

export function renderArgs(note) {
  const a = state.args;
  $('args').tBodies[0].replaceChildren(...a.items.map(argRow));
  $('args-prev').disabled = !a.pages.hasPrev;
  $('args-next').disabled = !a.pages.hasNext;
  $('args-page').textContent = state.capture ? `page ${a.pages.page} · ${a.items.length} rows` : '';
  let text = note;
  if (text === undefined) {
    if (!state.capture) text = 'Select a capture.';
    else if (!a.loaded || a.items.length) text = '';
    else if (a.pages.hasNext) text = 'This page is empty (the server bounds the work of each call); Next continues the scan.';
    else text = 'No records match.';
  }
  $('args-note').textContent = text;
  markTableRect();
}

export function flagBadges(r) {
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
export function funcLabel(ids) {
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
