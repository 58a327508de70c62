/*
 * Where a record's view lies in its base tensor, and the sizes the tensor
 * pane draws at: the picture of the base (which cells the view covers),
 * the 2-D slice a view shows, the grid cells asked of the server, the
 * heatmap's cell size. Pure: no DOM.
 */

export const MAX_FIT = 65536;              // most grid cells asked of the tensor endpoint
export const HEATMAP_SIDE = 512;           // the heatmap's longer side, CSS px

const VIEW_MAP_CELLS = 4096;        // the most cells the picture of the base draws
const VIEW_MAP_COLS = 64;           // and the most in a row
const VIEW_MAP_ENUM = 1 << 20;      // the most view elements placed on it
const VIEW_MAP_CELL_PX = 9;         // the smallest cell (a pixel of it is the grid line)
const VIEW_MAP_WIDTH = 360;         // the width a small base's picture grows to

/**
 * Where a view's elements lie in its base tensor (element offsets, strides
 * in elements): the first and last offsets it touches, and the base's
 * smallest size that holds them (the record does not carry the base's own
 * size: at least this much of it exists). `empty` for a view of no elements.
 */
export function viewGeometry(r) {
  const shape = (r.shape || []).map(Number), strides = (r.strides || []).map(Number);
  const start = Number(r.start_offset || 0);
  if (shape.some((d) => d === 0)) return { shape, strides, start, first: start, last: start, extent: start, empty: true };
  let last = start;
  for (let i = 0; i < shape.length; i++) last += (shape[i] - 1) * (strides[i] || 0);
  return { shape, strides, start, first: start, last, extent: last + 1, empty: false };
}

/** True when the strides are the shape's row-major ones (dimensions of 1 aside). */
export function isDense(geo) {
  let want = 1;
  for (let i = geo.shape.length - 1; i >= 0; i--) {
    if (geo.shape[i] !== 1 && geo.strides[i] !== want) return false;
    want *= geo.shape[i];
  }
  return true;
}

/**
 * The base tensor as a grid of cells, the view's elements marked: for a
 * view that is not the whole of a contiguous base (strided, or starting
 * past element 0); null otherwise. Rows are the second-last dimension's
 * stride when that fits, so a 2-D strided view looks like the matrix it
 * cuts; a base of more than VIEW_MAP_CELLS elements is a block of
 * elements a cell (covered when the view touches any element of it).
 * Returns { cells, cols, rows, perCell, px (a cell's size), covered
 * (Uint8Array, a cell each), filled, startCell, placed, total }.
 */
export function viewMapLayout(geo) {
  if (!geo || geo.empty || (geo.start === 0 && isDense(geo))) return null;
  const rowStride = geo.shape.length >= 2 ? geo.strides[geo.strides.length - 2] : 0;
  const perCell = Math.max(1, Math.ceil(geo.extent / VIEW_MAP_CELLS));
  let cols;
  if (perCell === 1 && rowStride > 0 && rowStride <= VIEW_MAP_COLS) cols = rowStride;
  else cols = Math.min(VIEW_MAP_COLS, Math.ceil(geo.extent / perCell));
  const cells = Math.ceil(geo.extent / perCell), rows = Math.ceil(cells / cols);
  const covered = new Uint8Array(cells);
  // Every element's offset, the last dimension fastest; at most VIEW_MAP_ENUM of them.
  const n = geo.shape.length, idx = new Array(n).fill(0);
  let placed = 0, total = 1;
  for (const d of geo.shape) total *= d;
  for (let off = geo.start; placed < Math.min(total, VIEW_MAP_ENUM); placed++) {
    covered[Math.floor(off / perCell)] = 1;
    for (let k = n - 1; k >= 0; k--) {
      idx[k]++;
      off += geo.strides[k] || 0;
      if (idx[k] < geo.shape[k]) break;
      off -= idx[k] * (geo.strides[k] || 0);
      idx[k] = 0;
    }
  }
  let filled = 0;
  for (let i = 0; i < cells; i++) if (covered[i]) filled++;
  // Cells of 9 to 24 px: a small base is drawn large enough to read.
  const px = Math.max(VIEW_MAP_CELL_PX, Math.min(24, Math.floor(VIEW_MAP_WIDTH / cols)));
  return { cells, cols, rows, perCell, px, covered, filled, startCell: Math.floor(geo.start / perCell), placed, total };
}

/** The 2-D slice a tensor's view shows: [rows, cols]. */
export function sliceDims(shape) {
  if (!shape.length) return [1, 1];
  if (shape.length === 1) return [1, shape[0]];
  return shape.slice(-2);
}

/** Asks for no more grid cells than the heatmap can show at 1 px a cell. */
export function chooseFit(shape) {
  const [rows, cols] = sliceDims(shape);
  return Math.max(64, Math.min(MAX_FIT, Math.min(rows, HEATMAP_SIDE) * Math.min(cols, HEATMAP_SIDE)));
}

/** Integer cell size: the longer side about HEATMAP_SIDE px, at least 1 px a cell. */
export const cellSize = (gr, gc) => Math.max(1, Math.floor(HEATMAP_SIDE / Math.max(gr, gc, 1)));

/** The leading indices of a slice, each clamped into its dimension (0 when not given). */
export function clampIndex(lead, index) {
  return lead.map((dim, i) => Math.max(0, Math.min((index || [])[i] || 0, dim - 1)));
}
