// geometry.mjs: a view in its base tensor, and the sizes the pane draws at.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cellSize, chooseFit, clampIndex, isDense, sliceDims, viewGeometry, viewMapLayout } from '../web/geometry.mjs';

test('a view spans from its start to its last element', () => {
  const geo = viewGeometry({ shape: ['3', '4'], strides: ['20', '2'], start_offset: '5' });
  assert.deepEqual(geo, { shape: [3, 4], strides: [20, 2], start: 5, first: 5, last: 51, extent: 52, empty: false });
  assert.equal(viewGeometry({ shape: [0, 4], strides: [4, 1] }).empty, true);
  assert.ok(isDense(viewGeometry({ shape: [3, 4], strides: [4, 1] })));
  assert.ok(isDense(viewGeometry({ shape: [3, 1], strides: [1, 7] })));
  assert.ok(!isDense(viewGeometry({ shape: [3, 4], strides: [8, 1] })));
});

test('no picture for a whole contiguous base', () => {
  assert.equal(viewMapLayout(viewGeometry({ shape: [3, 4], strides: [4, 1] })), null);
  assert.equal(viewMapLayout(null), null);
});

test('a strided 2-D view is drawn as the matrix it cuts', () => {
  // Rows of 10, the view every other column of 5 rows, from element 1.
  const map = viewMapLayout(viewGeometry({ shape: [5, 4], strides: [10, 2], start_offset: 1 }));
  assert.equal(map.cols, 10);
  assert.equal(map.perCell, 1);
  assert.equal(map.cells, 48);  // elements 0..47
  assert.equal(map.rows, 5);
  assert.equal(map.filled, 20);
  assert.equal(map.startCell, 1);
  assert.equal(map.px, 24);
  assert.deepEqual([...map.covered.slice(0, 10)], [0, 1, 0, 1, 0, 1, 0, 1, 0, 0]);
});

test('a large base is drawn a block of elements a cell', () => {
  const map = viewMapLayout(viewGeometry({ shape: [100, 100], strides: [200, 1] }));
  assert.ok(map.cells <= 4096);
  assert.ok(map.perCell > 1);
  assert.equal(map.cols, 64);
  assert.equal(map.total, 10000);
});

test('slices, grid cells asked for, cell sizes', () => {
  assert.deepEqual(sliceDims([]), [1, 1]);
  assert.deepEqual(sliceDims([7]), [1, 7]);
  assert.deepEqual(sliceDims([2, 3, 4]), [3, 4]);
  assert.equal(chooseFit([2, 3]), 64);
  assert.equal(chooseFit([1000, 1000]), 65536);
  assert.equal(chooseFit([100, 200]), 20000);
  assert.equal(cellSize(4, 8), 64);
  assert.equal(cellSize(1000, 10), 1);
  assert.deepEqual(clampIndex([2, 5], [7, -1]), [1, 0]);
  assert.deepEqual(clampIndex([2, 5], null), [0, 0]);
});
