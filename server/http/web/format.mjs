/*
 * How the page prints what the API returns: numbers (NaN and the
 * infinities come as strings in JSON), byte counts, 64-bit task ids, enum
 * names without their prefix, shapes, scalars from their bits. Pure: no DOM.
 */

/** A JSON value (number, "NaN", "Infinity", "-Infinity", decimal string) as a number; null stays null. */
export function toNum(v) {
  if (v === null || v === undefined) return null;
  return typeof v === 'number' ? v : Number(v);
}

/** Floats to 6 significant digits (trailing zeros dropped); integers in full. */
export function fmtNum(v) {
  const n = toNum(v);
  if (n === null) return '—';
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  if (Number.isInteger(n) && Math.abs(n) < 1e15) return String(n);
  return n.toPrecision(6).replace(/(\.\d*?)0+(?=$|e)/, '$1').replace(/\.(?=$|e)/, '');
}

export function fmtBytes(v) {
  const n = Number(v || 0);
  if (!Number.isFinite(n)) return String(v);
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let x = n / 1024, u = 0;
  while (x >= 1024 && u < units.length - 1) { x /= 1024; u++; }
  return `${x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : x.toFixed(0)} ${units[u]}`;
}

/** A 64-bit id (decimal string, number or BigInt) as "0x" + 16 hex digits. */
export function taskHex(v) {
  try { return '0x' + BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0'); } catch (_) { return String(v); }
}

/** "ROLE_INOUT" -> "inout"; stages become "before" / "after". */
export function short(v, prefix) {
  const s = String(v ?? '');
  return (s.startsWith(prefix) ? s.slice(prefix.length) : s).toLowerCase();
}
export const stageShort = (s) => ({ STAGE_BEFORE_DISPATCH: 'before', STAGE_AFTER_COMPLETION: 'after' })[s] || short(s, 'STAGE_');
export const shapeStr = (shape) => (shape && shape.length ? shape.join('x') : '()');
export const countOf = (v) => Number(v || 0);

export function fmtValue(v) {
  if (v === null || v === undefined) return 'not captured';
  return fmtNum(v);
}

/**
 * A scalar's bits, and its value as the server read it (scalar_value: the
 * manifest's JSON token, float16 and bfloat16 included; NaN and the
 * infinities as strings). 64-bit integers come from the bits, exactly (a
 * JSON number past 2^53 would round).
 */
export function scalarBits(r) {
  try { return BigInt.asUintN(64, BigInt(r.scalar_bits || '0')); } catch (_) { return 0n; }
}

export function scalarText(r) {
  if (r.dtype === 'DTYPE_INT64') return String(BigInt.asIntN(64, scalarBits(r)));
  if (r.dtype === 'DTYPE_UINT64') return String(scalarBits(r));
  if (r.scalar_value !== undefined) return String(r.scalar_value);
  return '(no decoder for this dtype)';
}
