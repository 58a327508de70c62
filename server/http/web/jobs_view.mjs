/*
 * The jobs list and the job view: the ranks x steps grid (a cell opens its
 * rank's capture filtered to its step) and the job questions (first
 * non-finite, compare against another job, compare ranks). Text from the
 * server goes in through textContent (dom.mjs's h), never as HTML.
 */
import { api } from './api.mjs';
import { $, h } from './dom.mjs';
import { cellHash, cellText, comparisonAnswer, firstNonfiniteAnswer, gridModel, lossText, recordHash } from './job_grid.mjs';
import { setError } from './status.mjs';

const enc = encodeURIComponent;
const jobPath = (job) => `v1/jobs/${enc(job)}`;

export const jobs = { selected: null, gen: 0 };

/** The jobs list: a row per job, a click opens its view. */
export async function loadJobs() {
  try {
    const resp = await api('v1/jobs');
    const tbody = $('jobs').tBodies[0];
    tbody.replaceChildren(...(resp.jobs || []).map((j) => h('tr', { dataset: { job: String(j.job) }, tabindex: '0' },
      h('td', { class: 'mono', text: j.job }),
      h('td', { class: 'num', text: `${j.ranks_present || 0}/${j.world_size || 0}` }),
      h('td', { class: 'num', text: j.ranks_live || 0 }),
      h('td', { text: (j.crashed_ranks || []).join(',') }),
      h('td', { text: (j.missing_ranks || []).join(',') }))));
    setError('jobs', null);
  } catch (e) {
    setError('jobs', e);
  }
}

function gridTable(model) {
  const head = h('tr', {}, h('th', { scope: 'col', text: 'rank' }),
    ...model.steps.map((s) => h('th', { scope: 'col', class: 'num', text: `step ${s}` })),
    h('th', { scope: 'col', text: 'losses' }));
  const rows = model.rows.map((r) => {
    if (r.missing) {
      return h('tr', { class: 'missing', dataset: { rank: String(r.rank) } },
        h('th', { scope: 'row', text: `rank ${r.rank}` }),
        h('td', { colspan: String(model.steps.length + 1), class: 'muted', text: 'missing' }));
    }
    const label = `rank ${r.rank}${r.live ? ' (live)' : ''}${r.crashed ? ' (crashed)' : ''}`;
    return h('tr', { dataset: { rank: String(r.rank), capture: r.capture } },
      h('th', { scope: 'row', title: r.capture, text: label }),
      ...r.cells.map((c) => h('td', {
        class: ['cell', c.nan && 'nan', c.overflow && 'overflow', c.crash && 'crash'].filter(Boolean).join(' '),
        dataset: { step: String(c.step), nan: String(c.nan), overflow: String(c.overflow), crash: String(c.crash) },
        tabindex: '0',
        title: `${c.records} records, ${c.nonfinite} non-finite, ${c.overflowRecords} overflow, ${c.overwritten} overwritten`,
      }, h('a', { href: cellHash(r.capture, c.step), text: cellText(c) }))),
      h('td', { class: 'muted', text: lossText(r) }));
  });
  return h('table', { id: 'job-grid-table' }, h('thead', {}, head), h('tbody', {}, ...rows));
}

async function answerFirstNonfinite(job, gen) {
  const out = $('job-first-nonfinite');
  try {
    const a = firstNonfiniteAnswer(await api(`${jobPath(job)}/first_nonfinite`));
    if (gen !== jobs.gen) return;
    out.replaceChildren(a.capture ? h('a', { href: recordHash(a.capture, a.recordId), text: a.text }) : a.text);
    out.dataset.rank = a.capture ? String(a.rank) : '';
  } catch (e) {
    if (gen === jobs.gen) out.textContent = String((e && e.message) || e);
  }
}

/** Shows one job: its grid and its first non-finite record. */
export async function showJob(job) {
  jobs.selected = job || null;
  const gen = ++jobs.gen;
  $('job-pane').hidden = !job;
  if (!job) return;
  $('job-name').textContent = job;
  $('job-answer').textContent = '';
  $('job-first-nonfinite').textContent = '…';
  try {
    const model = gridModel(await api(`${jobPath(job)}/grid`));
    if (gen !== jobs.gen) return;
    $('job-grid').replaceChildren(gridTable(model));
    $('job-grid-note').textContent = model.capped
      ? `the first ${model.steps.length} steps shown (at most ${model.maxSteps}); later steps are left out` : '';
    setError('job', null);
  } catch (e) {
    if (gen === jobs.gen) setError('job', e);
  }
  await answerFirstNonfinite(job, gen);
}

async function compare(path, params) {
  const out = $('job-answer');
  out.textContent = '…';
  try {
    out.textContent = comparisonAnswer(await api(path, params));
  } catch (e) {
    out.textContent = String((e && e.message) || e);
  }
}

/** The job list's clicks and the two comparison forms. `open(job)` shows a job. */
export function wireJobs(open) {
  const pick = (ev) => {
    const tr = ev.target.closest('tr[data-job]');
    if (tr) open(tr.dataset.job);
  };
  $('jobs').tBodies[0].addEventListener('click', pick);
  $('jobs').tBodies[0].addEventListener('keydown', (ev) => { if (ev.key === 'Enter') pick(ev); });
  $('compare-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (jobs.selected) compare(`${jobPath(jobs.selected)}/compare`, { reference: $('compare-reference').value.trim() });
  });
  $('compare-ranks-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (jobs.selected) compare(`${jobPath(jobs.selected)}/compare_ranks`, { reference_rank: $('compare-rank').value.trim() });
  });
}
