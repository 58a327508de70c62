/*
 * What the page keeps in its URL and puts in the API's: the location hash
 * (#job=... or #capture=...&task_id=...&record=...&index=...) that makes a view
 * shareable, and an API URL's query string. Pure: no DOM, no location.
 */
import { filterNames } from './filters.mjs';

const enc = encodeURIComponent;

/** path?k=v&... with the parameters that are set (not undefined, null or ''). */
export function apiUrl(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') qs.append(k, String(v));
  }
  const q = qs.toString();
  return q ? `${path}?${q}` : path;
}

/** "1,2,3" as [1, 2, 3]; null when empty or not a list of indices. */
export function parseIndex(text) {
  if (!text) return null;
  const parts = String(text).split(',').map((s) => s.trim());
  return parts.every((s) => /^\d+$/.test(s)) ? parts.map(Number) : null;
}

export const sameIndex = (a, b) => (a || []).join(',') === (b || []).join(',');

/**
 * The hash of a view: its job (the job view), its capture, the applied filters (normalised, by
 * name), and its record ({id, index}) or null. '' when there is nothing.
 * Commas stay readable. `names`: the filter fields', in their order.
 */
export function hashFor({ job, capture, query, record }, names = filterNames()) {
  const parts = [];
  const add = (k, v) => { if (v !== '' && v !== null && v !== undefined) parts.push(`${k}=${enc(v).replace(/%2C/gi, ',')}`); };
  add('job', job);
  add('capture', capture);
  for (const k of names) add(k, query[k]);
  if (record) {
    add('record', record.id);
    if (record.index && record.index.length) add('index', record.index.join(','));
  }
  return parts.length ? `#${parts.join('&')}` : '';
}

/**
 * A hash read back: token (null when absent), job and capture (null when absent),
 * filters (raw strings by name, '' when absent), record (null when absent)
 * and index (parseIndex's).
 */
export function parseHash(hash, names = filterNames()) {
  const p = new URLSearchParams(String(hash || '').replace(/^#/, ''));
  return {
    token: p.has('token') ? p.get('token') : null,
    job: p.get('job'),
    capture: p.get('capture'),
    filters: Object.fromEntries(names.map((k) => [k, p.get(k) || ''])),
    record: p.get('record'),
    index: parseIndex(p.get('index')),
  };
}
