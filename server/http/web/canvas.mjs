/*
 * The tensor pane's canvases: a grid of colours (the heatmap, the diff),
 * the histogram, and the data-drawn / data-rect markers that say what was
 * drawn where (the page's tests read them).
 */
import { BG, COLOURS, HATCH, rgb } from './colour.mjs';
import { fmtNum } from './format.mjs';
import { cellSize } from './geometry.mjs';

const HIST_W = 512, HIST_H = 120;

function ctx2d(canvas) {
  return canvas.getContext('2d', { willReadFrequently: true });
}

function sizeCanvas(canvas, w, hgt) {
  canvas.width = w;
  canvas.height = hgt;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${hgt}px`;
  const ctx = ctx2d(canvas);
  ctx.imageSmoothingEnabled = false;
  ctx.fillStyle = rgb(BG);
  ctx.fillRect(0, 0, w, hgt);
  return ctx;
}

/** Paints a grid of colours (HATCH: grey stripes) at cellSize px a cell; returns the cell size. */
export function drawCells(canvas, gr, gc, colours) {
  const cell = cellSize(gr, gc);
  const w = gc * cell, hgt = gr * cell;
  if (w > 32767 || hgt > 32767) throw new Error(`a ${gr}x${gc} grid is too large to draw`);
  const ctx = sizeCanvas(canvas, w, hgt);
  if (w > 0 && hgt > 0) {
    const img = ctx.createImageData(w, hgt), px = img.data;
    for (let y = 0, o = 0; y < hgt; y++) {
      const base = Math.floor(y / cell) * gc;
      for (let x = 0; x < w; x++, o += 4) {
        let c = colours[base + Math.floor(x / cell)] || COLOURS.hatchA;
        if (c === HATCH) c = ((x + y) >> 2) & 1 ? COLOURS.hatchA : COLOURS.hatchB;
        px[o] = c[0]; px[o + 1] = c[1]; px[o + 2] = c[2]; px[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
  }
  markDrawn(canvas);
  return cell;
}

export function drawHistogram(canvas, hist) {
  const ctx = sizeCanvas(canvas, HIST_W, HIST_H);
  const padTop = 14, padBottom = 16, plotH = HIST_H - padTop - padBottom;
  const counts = ((hist && hist.counts) || []).map(Number);
  const peak = counts.reduce((m, c) => Math.max(m, c), 0);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#222';
  if (!peak) {
    ctx.textBaseline = 'middle';
    ctx.fillText('no finite values', 8, HIST_H / 2);
  } else {
    const bw = HIST_W / counts.length;
    ctx.fillStyle = '#3b6ea5';
    counts.forEach((c, i) => {
      if (!c) return;
      const bh = Math.max(1, Math.round((plotH * c) / peak));
      ctx.fillRect(Math.floor(i * bw), padTop + plotH - bh, Math.max(1, Math.floor(bw) - 1), bh);
    });
    ctx.fillStyle = '#999';
    ctx.fillRect(0, padTop + plotH, HIST_W, 1);
    ctx.fillStyle = '#222';
    ctx.textBaseline = 'bottom';
    ctx.textAlign = 'left';
    ctx.fillText(fmtNum(hist.min), 2, HIST_H - 1);
    ctx.textAlign = 'right';
    ctx.fillText(fmtNum(hist.max), HIST_W - 2, HIST_H - 1);
    ctx.textBaseline = 'top';
    ctx.fillText(`peak bin ${peak}`, HIST_W - 2, 1);
    ctx.textAlign = 'left';
    ctx.fillText(`${counts.length} bins`, 2, 1);
  }
  canvas.setAttribute('aria-label', peak ? `histogram of the finite values from ${fmtNum(hist.min)} to ${fmtNum(hist.max)}` : 'no finite values');
  markDrawn(canvas);
}

/** data-drawn: how many pixels differ from the white background. */
function markDrawn(canvas) {
  let n = 0;
  if (canvas.width > 0 && canvas.height > 0) {
    const d = ctx2d(canvas).getImageData(0, 0, canvas.width, canvas.height).data;
    for (let o = 0; o < d.length; o += 4) {
      if (d[o] !== BG[0] || d[o + 1] !== BG[1] || d[o + 2] !== BG[2] || d[o + 3] !== 255) n++;
    }
  }
  canvas.dataset.drawn = String(n);
}

export function clearMarkers(canvas) {
  delete canvas.dataset.drawn;
  delete canvas.dataset.rect;
}

/** data-rect of each shown canvas: CSS px from the top-left with everything scrolled to the top. */
export function updateRects() {
  for (const id of ['heatmap', 'histogram', 'diff', 'view-map']) {
    const c = document.getElementById(id);
    const drawn = id === 'view-map' ? c.dataset.cells : c.dataset.drawn;
    if (!c.getClientRects().length || drawn === undefined) { delete c.dataset.rect; continue; }
    const r = c.getBoundingClientRect();
    let x = r.left + window.scrollX, y = r.top + window.scrollY;
    for (let p = c.parentElement; p && p !== document.body; p = p.parentElement) { x += p.scrollLeft; y += p.scrollTop; }
    c.dataset.rect = [x, y, r.width, r.height].map(Math.round).join(',');
  }
}
