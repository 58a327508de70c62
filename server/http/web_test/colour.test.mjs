// colour.mjs: the heatmap's and the diff's colour scales.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BG, COLOURS, HATCH, VIRIDIS, VIRIDIS_STOPS, buildLut, cellDiff, diffColour, heatColour, rgb, valueRange } from '../web/colour.mjs';

test('the viridis table runs from its first stop to its last', () => {
  assert.equal(VIRIDIS.length, 256);
  assert.deepEqual(VIRIDIS[0], VIRIDIS_STOPS[0]);
  assert.deepEqual(VIRIDIS[255], VIRIDIS_STOPS[VIRIDIS_STOPS.length - 1]);
  assert.deepEqual(buildLut([[0, 0, 0], [100, 200, 50]], 3), [[0, 0, 0], [50, 100, 25], [100, 200, 50]]);
  assert.equal(rgb([1, 2, 3]), 'rgb(1,2,3)');
});

test('heat colours: the scale over [lo, hi], non-finite values and gaps in their own', () => {
  assert.deepEqual(heatColour(0, 0, 10), VIRIDIS[0]);
  assert.deepEqual(heatColour(10, 0, 10), VIRIDIS[255]);
  assert.deepEqual(heatColour(99, 0, 10), VIRIDIS[255]);  // clamped
  assert.deepEqual(heatColour(5, 5, 5), VIRIDIS[128]);    // a flat range is mid-scale
  assert.equal(heatColour(null, 0, 1), HATCH);
  assert.deepEqual(heatColour(NaN, 0, 1), COLOURS.nan);
  assert.deepEqual(heatColour(Infinity, 0, 1), COLOURS.posInf);
  assert.deepEqual(heatColour(-Infinity, 0, 1), COLOURS.negInf);
});

test('the value range is the stats when finite, else the finite grid values', () => {
  assert.deepEqual(valueRange({ stats: { min: -1, max: '3' } }), [-1, 3]);
  assert.deepEqual(valueRange({ stats: { min: 'NaN', max: 1 }, values: [2, 'Infinity', null, -4] }), [-4, 2]);
  assert.deepEqual(valueRange({ values: ['NaN', null] }), [0, 1]);
});

test('cell differences: equal is 0, NaN on one side is NaN, a gap is null', () => {
  assert.equal(cellDiff(1, 3), 2);
  assert.equal(cellDiff(NaN, NaN), 0);
  assert.equal(cellDiff(Infinity, Infinity), 0);
  assert.ok(Number.isNaN(cellDiff(1, NaN)));
  assert.equal(cellDiff(null, 1), null);
  assert.equal(cellDiff(1, null), null);
});

test('diff colours: white for none, blue below, red above, scaled by the largest', () => {
  assert.equal(diffColour(0, 5), BG);
  assert.equal(diffColour(null, 5), HATCH);
  assert.deepEqual(diffColour(5, 5), COLOURS.diffPos);
  assert.deepEqual(diffColour(-5, 5), COLOURS.diffNeg);
  assert.deepEqual(diffColour(Infinity, 5), COLOURS.diffPosInf);
  assert.deepEqual(diffColour(-Infinity, 5), COLOURS.diffNegInf);
  const weak = diffColour(0.5, 5), strong = diffColour(4, 5);
  assert.ok(weak[1] > strong[1], 'a smaller difference is paler');
});
