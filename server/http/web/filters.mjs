/*
 * The args table's filters: ONE array of field descriptors, from which the
 * form is built (filter_form.mjs), the typed values are checked and
 * normalised, the query parameters and the location hash are made. Each
 * descriptor: name (the query parameter of GET /v1/captures/NAME/args),
 * kind (text, number, enum, bool), and what the kind needs:
 *   enum: values (what the server takes, in its short spelling);
 *   bool: optional (true: any / true / false, as the proto's `optional
 *         bool`; false: a checkbox, only true is sent);
 *   number: min, max, and default (sent only when it differs);
 *   text: format (task_id, func: how it is checked), suggestions.
 * label, title, placeholder and size only shape the form. The fields come
 * from the server's schema (fieldsFromSchema), so a field added to the
 * server's filter table is in the form without a change here. Pure: no DOM.
 */
import { taskHex } from './format.mjs';

const UINT32_MAX = 0xffffffff;

// How some fields are shown and checked in the form, by name: what the
// server's schema does not say. A field the schema has and this does not
// know is shown from the schema alone.
const HINTS = {
  task_id: { format: 'task_id', placeholder: '0x… or decimal', size: 19 },
  func: { format: 'func', placeholder: 'name or id' },
  func_type: { placeholder: 'elementwise', size: 12 },
  func_unknown: { label: 'func unknown' },
};

// Not a filter: the page's own paging parameter of the same query.
const PAGE_SIZE = { name: 'page_size', kind: 'number', min: 1, max: 1000, default: 100 };

/**
 * The form's fields from the server's schema (GET /v1/schema's "filter":
 * the one filter table of the server, each {name, kind, values, help}),
 * page_size last. Kinds: enum (values), bool (any / true / false), flag
 * (a checkbox: only true is sent), number, text; an unknown kind is typed
 * as text. Throws Error for a schema that is not a list of named fields.
 */
export function fieldsFromSchema(schema) {
  if (!Array.isArray(schema)) throw new Error('the server\'s schema has no list of filter fields');
  const seen = new Set();
  const fields = schema.map((s) => {
    if (!s || typeof s.name !== 'string' || !/^[a-z][a-z0-9_]{0,63}$/.test(s.name) || seen.has(s.name) || s.name === PAGE_SIZE.name) {
      throw new Error(`the server's schema has a field without a good name: ${JSON.stringify(s && s.name)}`);
    }
    seen.add(s.name);
    const base = { name: s.name, title: typeof s.help === 'string' ? s.help : undefined, ...(HINTS[s.name] || {}) };
    const values = Array.isArray(s.values) ? s.values.map((v) => String(v).toLowerCase()) : [];
    switch (s.kind) {
      case 'enum': return { ...base, kind: 'enum', values };
      case 'bool': return { ...base, kind: 'bool', optional: true };
      case 'flag': return { ...base, kind: 'bool', optional: false };
      case 'number': return { ...base, kind: 'number', min: 0, max: UINT32_MAX };
      default: return { ...base, kind: 'text' };
    }
  });
  return [...fields, PAGE_SIZE];
}

// The fields the page uses: page_size alone until the schema is read.
let current = [PAGE_SIZE];

/** Sets the fields every function here defaults to (from fieldsFromSchema). */
export function setFilterFields(fields) { current = fields; }

/** The fields in use, in the order they appear in the form and the hash. */
export function filterFields() { return current; }

/** The fields' names, in the order they appear in the hash. */
export function filterNames(fields = current) { return fields.map((f) => f.name); }

/** The values an enum or optional bool field takes ('' is any); null for the others. */
export function choicesOf(field) {
  if (field.kind === 'enum') return field.values;
  if (field.kind === 'bool' && field.optional) return ['true', 'false'];
  return null;
}

export function emptyFilters(fields = current) {
  return Object.fromEntries(fields.map((f) => [f.name, '']));
}

/** Parses a task id typed as "0x..." or decimal into "0x" + 16 hex digits ('' when empty). */
export function parseTaskId(text) {
  const t = String(text || '').trim();
  if (!t) return '';
  if (!/^(0x[0-9a-f]+|\d+)$/i.test(t) || BigInt(t) >= 2n ** 64n) {
    throw new Error(`task_id "${t}" is not a 64-bit hex (0x...) or decimal number`);
  }
  return taskHex(t);
}

// How each text format is checked and normalised.
const TEXT_FORMATS = {
  task_id: parseTaskId,
  // A kernel's name in the capture's kernel table, or its func id.
  func(raw) {
    const func = String(raw || '').trim();
    if (/^\d+$/.test(func)) {
      if (Number(func) > UINT32_MAX) throw new Error('func must be a kernel name or a 32-bit func id');
      return String(Number(func));
    }
    if (func.length > 128) throw new Error('func must be a kernel name (at most 128 characters) or a func id');
    return func;
  },
};

/** One field's raw form value, checked and normalised; throws Error with a message. */
function normalizeField(field, raw) {
  const k = field.name;
  switch (field.kind) {
    case 'text':
      return (TEXT_FORMATS[field.format] || ((v) => String(v || '').trim()))(raw);
    case 'enum':
    case 'bool': {
      if (field.kind === 'bool' && !field.optional) {
        return ['true', 'on', '1'].includes(String(raw || '').toLowerCase()) ? 'true' : '';
      }
      const allowed = choicesOf(field);
      const v = String(raw || '').trim().toLowerCase();
      if (v && !allowed.includes(v)) throw new Error(`${k} must be one of ${allowed.join(', ')}`);
      return v;
    }
    case 'number': {
      const v = String(raw || '').trim();
      if (field.default !== undefined) {
        if (v && (!/^\d+$/.test(v) || Number(v) < field.min)) throw new Error(`${k} must be a positive integer`);
        const n = v ? Math.min(Number(v), field.max) : field.default;
        return n === field.default ? '' : String(n);
      }
      if (v && (!/^\d+$/.test(v) || Number(v) > field.max)) throw new Error(`${k} must be a 32-bit non-negative integer`);
      return v ? String(Number(v)) : '';
    }
    default:
      throw new Error(`${k}: no field kind ${field.kind}`);
  }
}

/** Validates and normalises raw filter strings (by name); throws Error with a message. */
export function normalizeFilters(raw, fields = current) {
  const f = emptyFilters(fields);
  for (const field of fields) f[field.name] = normalizeField(field, raw[field.name]);
  return f;
}

/** The query parameters of normalised filters: the ones set. */
export function queryParams(f, fields = current) {
  const p = {};
  for (const { name } of fields) if (f[name] !== '') p[name] = f[name];
  return p;
}

/** What a form shows for a normalised value (a number field its default when unset). */
export function formValue(field, value) {
  if (field.kind === 'number' && field.default !== undefined) return value || String(field.default);
  return value || '';
}
