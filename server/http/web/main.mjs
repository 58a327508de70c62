/*
 * The wiring of the page (app.js runs init): the hash applied, the 2 s
 * refresh, the token form, every control's handler.
 */
import { api, getToken, setToken, setUnauthorizedHandler } from './api.mjs';
import { applyFilters, argsPage, loadArgsPage, markTableRect } from './args_view.mjs';
import { updateRects } from './canvas.mjs';
import { loadCaptures, loadSummary, renderCaptureInfo, selectCapture } from './captures_view.mjs';
import { BG, COLOURS, VIRIDIS_STOPS, rgb } from './colour.mjs';
import { onDiffMove } from './diff_view.mjs';
import { $ } from './dom.mjs';
import { emptyFilters, fieldsFromSchema, setFilterFields } from './filters.mjs';
import { buildFilterForm, fillFilterForm } from './filter_form.mjs';
import { writeHash } from './hash.mjs';
import { clearRecord, loadRecord, onHeatmapMove, onSliceChange, selectRecord } from './record_view.mjs';
import { jobs, loadJobs, showJob, wireJobs } from './jobs_view.mjs';
import { isLive, state } from './state.mjs';
import { clearErrors, setError } from './status.mjs';
import { parseHash } from './url_state.mjs';

const REFRESH_MS = 2000;            // the captures list and live pages refresh this often

/** Applies the hash: capture, then the filters (as a form submit would), then the record. */
function applyHash() {
  const p = parseHash(location.hash);
  if (p.token !== null) {
    setToken(p.token);
    $('token').value = p.token;
    showAuth(true);
  }
  showJob(p.job);
  selectCapture(p.capture);
  fillFilterForm($('filters'), p.filters);
  applyFilters();
  if (p.record && state.capture) selectRecord(p.record, { index: p.index });
  else if (state.record) clearRecord();
  writeHash();
}

/** The 2 s refresh: the captures list, the selected capture, and live first pages. */
async function tick() {
  try {
    await loadJobs();
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
      if ((wasLive || isLive()) && a.pages.page === 1 && a.loaded && !a.loading) await loadArgsPage({ refresh: true });
    }
  } catch (e) {
    setError('refresh', e);
  } finally {
    setTimeout(tick, REFRESH_MS);
  }
}

function showAuth(show) {
  $('auth').hidden = !show;
  if (show && !getToken()) $('token').focus();
}

/** Re-runs everything shown, e.g. with a new token. */
function reloadAll() {
  clearErrors();
  setError('auth', null);
  loadJobs();
  if (jobs.selected) showJob(jobs.selected);
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

function wireCaptureList() {
  onRowActivate($('captures').tBodies[0], 'data-capture', (tr) => {
    if (selectCapture(tr.dataset.capture)) { loadArgsPage(); writeHash(); }
  });
  $('captures-next').addEventListener('click', () => { if (state.caps.pages.forward()) loadCaptures(); });
  $('captures-prev').addEventListener('click', () => { if (state.caps.pages.back()) loadCaptures(); });
  const capFilters = $('capture-filters');
  const onCapFilters = (ev) => {
    ev.preventDefault();
    const data = new FormData(capFilters);
    state.caps.filter = { state: String(data.get('state') || ''), label: String(data.get('label') || '').trim() };
    state.caps.pages.reset();
    loadCaptures();
  };
  capFilters.addEventListener('submit', onCapFilters);
  capFilters.addEventListener('change', onCapFilters);
}

/**
 * The filter fields from the server's schema (the server's one filter
 * table): a field the server gains is in the form with no change here.
 * Without it the page still lists and shows records, unfiltered.
 */
async function loadFilterFields() {
  try {
    const schema = await api('v1/schema');
    setFilterFields(fieldsFromSchema(schema.filter));
    setError('schema', null);
  } catch (e) {
    setError('schema', e);
  }
}

/** Reads the schema, builds the filter form, wires every control, applies the hash, starts the refresh. */
export async function init() {
  await loadFilterFields();
  for (const sw of document.querySelectorAll('.swatch[data-colour]')) sw.style.background = rgb(COLOURS[sw.dataset.colour]);
  $('legend-bar').style.background = `linear-gradient(to right, ${VIRIDIS_STOPS.map(rgb).join(', ')})`;
  $('diff-bar').style.background = `linear-gradient(to right, ${rgb(COLOURS.diffNeg)}, ${rgb(BG)}, ${rgb(COLOURS.diffPos)})`;
  buildFilterForm($('filters'));
  setUnauthorizedHandler(() => showAuth(true));
  if (getToken()) { $('token').value = getToken(); showAuth(true); }

  wireCaptureList();
  wireJobs((job) => { location.hash = `#job=${encodeURIComponent(job)}`; });
  onRowActivate($('args').tBodies[0], 'data-record-id', (tr) => {
    selectRecord(tr.dataset.recordId);
    writeHash();
  });
  $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); applyFilters(); });
  $('filters-reset').addEventListener('click', () => { fillFilterForm($('filters'), emptyFilters()); applyFilters(); });
  $('args-next').addEventListener('click', () => argsPage(+1));
  $('args-prev').addEventListener('click', () => argsPage(-1));
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
