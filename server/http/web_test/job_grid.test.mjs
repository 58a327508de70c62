// The job view's pure model: the grid from GET v1/jobs/JOB/grid, the hashes
// a cell and an answer open, the answers' text.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cellHash, cellText, comparisonAnswer, firstNonfiniteAnswer, gridModel, lossText, recordHash } from '../web/job_grid.mjs';

const names = ['task_id', 'step'];
const cell = (records, nonfinite = 0, overflow = 0) => ({ records: String(records), nonfinite: String(nonfinite), overflow: String(overflow) });

test('the grid: a row per rank, missing ranks empty, markers per cell', () => {
  const m = gridModel({
    job: 'train', world_size: 3, steps: [0, 1, 2], steps_capped: false, max_steps: 64,
    ranks: [
      { rank: 0, capture: 'train.rank0', state: 'CAPTURE_STATE_FINISHED', records: '9', last_step: 2,
        dropped_records: '4', dropped_overwrite: '1', cells: [cell(3), cell(3, 1), cell(3, 0, 2)] },
      { rank: 1, missing: true },
      { rank: 2, capture: 'train.rank2', state: 'CAPTURE_STATE_LIVE', crashed: true, last_step: 1,
        cells: [cell(3), cell(2), cell(0)] },
    ],
  });
  assert.deepEqual(m.steps, [0, 1, 2]);
  assert.equal(m.rows.length, 3);
  assert.deepEqual(m.rows[1], { rank: 1, missing: true, cells: [] });
  assert.deepEqual(m.rows[0].cells.map((c) => c.nan), [false, true, false]);
  assert.deepEqual(m.rows[0].cells.map((c) => c.overflow), [false, false, true]);
  assert.deepEqual(m.rows[0].cells.map((c) => c.crash), [false, false, false]);
  assert.deepEqual(m.rows[2].cells.map((c) => c.crash), [false, true, false]);
  assert.equal(m.rows[2].live, true);
  assert.equal(cellText(m.rows[0].cells[1]), '3 NaN');
  assert.equal(cellText(m.rows[2].cells[1]), '2 CRASH');
  assert.equal(lossText(m.rows[0]), 'dropped 4 (overwritten 1)');
  assert.equal(lossText(m.rows[2]), '');
});

test('a crashed rank whose last step is not shown: its last cell with records', () => {
  const m = gridModel({ steps: [0, 1], steps_capped: true,
    ranks: [{ rank: 0, crashed: true, last_step: 9, cells: [cell(1), cell(1)] }] });
  assert.equal(m.capped, true);
  assert.deepEqual(m.rows[0].cells.map((c) => c.crash), [false, true]);
});

test('an empty or partial answer makes an empty grid, not an error', () => {
  assert.deepEqual(gridModel(null).rows, []);
  assert.deepEqual(gridModel({ steps: [0], ranks: [{ rank: 0 }] }).rows[0].cells[0].records, 0);
});

test('a cell opens its rank capture at its step; an answer its record', () => {
  assert.equal(cellHash('train.rank2', 1, names), '#capture=train.rank2&step=1');
  assert.equal(cellHash('a&b=c', 0, names), '#capture=a%26b%3Dc&step=0');
  assert.equal(recordHash('train.rank2', '17', names), '#capture=train.rank2&record=17');
});

test('the answers as text', () => {
  assert.equal(firstNonfiniteAnswer({}).capture, null);
  const a = firstNonfiniteAnswer({
    first: { rank: 2, capture: 'j.rank2', arg: { record_id: '17', record: { step: 1, task_id_hex: '0x10', arg_index: 2 } } },
    funcs: ['<b>add</b>'],
  });
  assert.equal(a.text, 'rank 2, step 1, task 0x10 (<b>add</b>), arg 2');
  assert.equal(a.capture, 'j.rank2');
  assert.equal(a.rank, 2);
  assert.equal(a.recordId, '17');
  assert.match(comparisonAnswer({ records_compared: '5' }), /no divergence \(5 records/);
  assert.equal(comparisonAnswer({ first: { actual: { rank: 1, arg: { record: { step: 2, task_id: '7', arg_index: 1 } } }, reason: 'dtype' } }),
    'first divergence: rank 1, step 2, task 7, arg 1: dtype');
});
