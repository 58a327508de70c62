/*
 * An inout arg's after - before: its other stage's record found by a
 * query, the same slice of both fetched, the difference drawn cell by cell
 * (blue - white - red; NaN, ±Inf and cells not captured in their colours).
 */
import { api, capturePath } from './api.mjs';
import { $ } from './dom.mjs';
import { cellDiff, diffColour } from './colour.mjs';
import { drawCells, clearMarkers } from './canvas.mjs';
import { fmtNum, fmtValue, stageShort, taskHex, toNum } from './format.mjs';
import { state } from './state.mjs';
import { errMsg, setError } from './status.mjs';

const PARTNER_PAGES = 20;           // pages scanned for an inout arg's other stage

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

/** Finds the other stage and draws the difference (`fetchTensor` as the record view asks). */
export async function loadDiff(gen, name, ca, fit, index, tensor, fetchTensor) {
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
  const colours = diffs.map((d) => diffColour(d, maxAbs));
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

/** The grid cell under the mouse, [row, col], or null. */
export function cellAt(ev, v) {
  const r = ev.currentTarget.getBoundingClientRect();
  const col = Math.floor((ev.clientX - r.left) / v.cell), row = Math.floor((ev.clientY - r.top) / v.cell);
  return row >= 0 && col >= 0 && row < v.gr && col < v.gc ? [row, col] : null;
}

export function onDiffMove(ev) {
  const v = state.diffView;
  const at = v && cellAt(ev, v);
  if (!at) return;
  const i = at[0] * v.gc + at[1];
  $('hover').textContent = `(${at[0]}, ${at[1]}) before = ${fmtValue(v.before.values[i])}, ` +
    `after = ${fmtValue(v.after.values[i])}, after − before = ${v.diffs[i] === null ? 'not captured' : fmtNum(v.diffs[i])}`;
}
