/*
 * The page's colours, [r, g, b]: the viridis scale of the heatmap, the
 * colours of NaN, the infinities and cells not captured, and the blue -
 * white - red scale of an inout arg's after - before difference. Pure: no
 * DOM. White is every canvas' background.
 */

import { toNum } from './format.mjs';

export const BG = [255, 255, 255];
export const COLOURS = {
  nan: [255, 0, 255],         // magenta
  posInf: [255, 0, 0],        // red
  negInf: [0, 64, 255],       // saturated blue (viridis has none)
  hatchA: [205, 205, 205],    // not captured: grey stripes
  hatchB: [150, 150, 150],
  diffNeg: [33, 102, 172],    // diff: blue - white - red
  diffPos: [178, 24, 43],
  diffPosInf: [255, 200, 0],
  diffNegInf: [0, 215, 215],
};
/** A cell not captured: drawn as grey stripes. */
export const HATCH = 'hatch';
export const VIRIDIS_STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];

/** `n` colours evenly along the piecewise-linear scale through `stops`. */
export function buildLut(stops, n) {
  const lut = [];
  for (let i = 0; i < n; i++) {
    const x = (i / (n - 1)) * (stops.length - 1), j = Math.min(Math.floor(x), stops.length - 2), f = x - j;
    lut.push(stops[j].map((c, k) => Math.round(c + (stops[j + 1][k] - c) * f)));
  }
  return lut;
}

export const VIRIDIS = buildLut(VIRIDIS_STOPS, 256);

export const rgb = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;

/** A heatmap cell's colour: viridis over [lo, hi], or NaN / ±Inf / HATCH (null). */
export function heatColour(n, lo, hi) {
  if (n === null) return HATCH;
  if (Number.isNaN(n)) return COLOURS.nan;
  if (n === Infinity) return COLOURS.posInf;
  if (n === -Infinity) return COLOURS.negInf;
  const f = hi > lo ? (n - lo) / (hi - lo) : 0.5;
  return VIRIDIS[Math.round(Math.max(0, Math.min(1, f)) * (VIRIDIS.length - 1))];
}

/** after - before of one grid cell: 0 when equal, NaN when one is NaN, null when one is missing. */
export function cellDiff(b, a) {
  if (a === null || b === null) return null;
  if (a === b || (Number.isNaN(a) && Number.isNaN(b))) return 0;
  if (Number.isNaN(a) || Number.isNaN(b)) return NaN;
  return a - b;
}

/** A difference's colour, its strength relative to the largest finite one, `maxAbs`. */
export function diffColour(d, maxAbs) {
  if (d === null) return HATCH;
  if (d === 0) return BG;
  if (Number.isNaN(d)) return COLOURS.nan;
  if (d === Infinity) return COLOURS.diffPosInf;
  if (d === -Infinity) return COLOURS.diffNegInf;
  const s = 0.15 + 0.85 * Math.min(1, Math.abs(d) / (maxAbs || 1)), end = d > 0 ? COLOURS.diffPos : COLOURS.diffNeg;
  return BG.map((c, k) => Math.round(c + (end[k] - c) * s));
}

/** The colour range of a tensor answer: its stats' min/max, else the finite grid values'. */
export function valueRange(t) {
  let lo = toNum(t.stats && t.stats.min), hi = toNum(t.stats && t.stats.max);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = Infinity; hi = -Infinity;
    for (const v of t.values || []) { const n = toNum(v); if (Number.isFinite(n)) { lo = Math.min(lo, n); hi = Math.max(hi, n); } }
    if (lo > hi) { lo = 0; hi = 1; }
  }
  return [lo, hi];
}
