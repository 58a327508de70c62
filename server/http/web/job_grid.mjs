/*
 * The job view's model, from the server's JSON: GET v1/jobs/JOB/grid
 * (JobGrid) as rows of cells the page draws, the links a cell and an
 * answer open, and the job questions' answers as one line of text. Pure:
 * no DOM, no location; every string from the server stays a string.
 */
import { hashFor } from './url_state.mjs';

const num = (v) => Number(v || 0);

/**
 * The grid to draw: { job, steps, capped, maxSteps, rows }. A row per rank
 * (missing ranks: { rank, missing: true, cells: [] }); a cell per step
 * with its counts, `nan` and `overflow` markers, and `crash` on a crashed
 * rank's last cell that has records (its last step, when shown).
 */
export function gridModel(grid) {
  const g = grid || {};
  const steps = (g.steps || []).map(num);
  const rows = (g.ranks || []).map((r) => {
    const rank = num(r.rank);
    if (r.missing) return { rank, missing: true, cells: [] };
    const cells = steps.map((step, i) => {
      const c = (r.cells || [])[i] || {};
      return {
        step,
        records: num(c.records),
        nonfinite: num(c.nonfinite),
        overflowRecords: num(c.overflow),
        overwritten: num(c.overwritten),
        truncated: num(c.truncated),
        nan: num(c.nonfinite) > 0,
        overflow: num(c.overflow) > 0,
        crash: false,
      };
    });
    const crashed = !!r.crashed;
    if (crashed) {
      const last = num(r.last_step);
      let at = cells.findIndex((c) => c.step === last);
      if (at < 0) at = cells.map((c) => c.records > 0).lastIndexOf(true);
      if (at >= 0) cells[at].crash = true;
    }
    return {
      rank,
      missing: false,
      capture: String(r.capture || ''),
      live: r.state === 'CAPTURE_STATE_LIVE',
      crashed,
      records: num(r.records),
      droppedRecords: num(r.dropped_records),
      droppedOverwrite: num(r.dropped_overwrite),
      cells,
    };
  });
  return {
    job: String(g.job || ''),
    worldSize: num(g.world_size),
    steps,
    capped: !!g.steps_capped,
    maxSteps: num(g.max_steps),
    rows,
  };
}

/** The hash opening a rank's capture with its filter set to one step. */
export function cellHash(capture, step, names) {
  return hashFor({ capture, query: { step: String(step) }, record: null }, names);
}

/** The hash opening one record of a capture. */
export function recordHash(capture, recordId, names) {
  return hashFor({ capture, query: {}, record: { id: String(recordId), index: null } }, names);
}

/** A cell's text: its record count, then its markers. */
export function cellText(cell) {
  const marks = [];
  if (cell.nan) marks.push('NaN');
  if (cell.overflow) marks.push('OVF');
  if (cell.crash) marks.push('CRASH');
  return [String(cell.records), ...marks].join(' ');
}

/** A rank's losses as text ('' when none). */
export function lossText(row) {
  if (row.missing || (!row.droppedRecords && !row.droppedOverwrite)) return '';
  return `dropped ${row.droppedRecords} (overwritten ${row.droppedOverwrite})`;
}

/** FirstNonfiniteResponse as { text, rank, capture, recordId } (capture null: none found). */
export function firstNonfiniteAnswer(resp) {
  const f = resp && resp.first;
  if (!f || !f.arg) return { text: 'no record holds a NaN or an Inf', rank: null, capture: null, recordId: null };
  const rec = f.arg.record || {};
  const funcs = (resp.funcs || []).map(String).join(', ');
  const text = `rank ${num(f.rank)}, step ${num(rec.step)}, task ${rec.task_id_hex || rec.task_id}` +
    (funcs ? ` (${funcs})` : '') + `, arg ${num(rec.arg_index)}`;
  return { text, rank: num(f.rank), capture: String(f.capture || ''), recordId: String(f.arg.record_id) };
}

/** A comparison's last message (CompareProgress) as text. */
export function comparisonAnswer(resp) {
  const d = resp && resp.first;
  const compared = num(resp && resp.records_compared);
  if (!d || !d.actual) return `no divergence (${compared} records compared)`;
  const a = d.actual;
  const rec = (a.arg && a.arg.record) || {};
  const where = `rank ${num(a.rank)}, step ${num(rec.step)}, task ${rec.task_id_hex || rec.task_id}, arg ${num(rec.arg_index)}`;
  const what = d.reason ? String(d.reason)
    : `element ${num(d.element)}: ${d.actual_value} vs ${d.reference_value}`;
  return `first divergence: ${where}: ${what}`;
}
