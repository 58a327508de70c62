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
 *   text: format (task_id, dtype, func: how it is checked), suggestions.
 * label, title, placeholder and size only shape the form. The array is
 * plain data so that it can come from the server instead. Pure: no DOM.
 */
import { taskHex } from './format.mjs';

const UINT32_MAX = 0xffffffff;

export const FILTER_FIELDS = [
  { name: 'task_id', kind: 'text', format: 'task_id', placeholder: '0x… or decimal', size: 19 },
  { name: 'stage', kind: 'enum', values: ['before_dispatch', 'after_completion'] },
  { name: 'role', kind: 'enum', values: ['input', 'output', 'inout'] },
  { name: 'kind', kind: 'enum', values: ['tensor', 'scalar'] },
  {
    name: 'dtype', kind: 'text', format: 'dtype', placeholder: 'float32', size: 8,
    suggestions: ['float32', 'float16', 'bfloat16', 'float64', 'int8', 'int16', 'int32', 'int64',
      'uint8', 'uint16', 'uint32', 'uint64', 'bool', 'fp8e4m3fn', 'fp8e8m0', 'fp4e2m1'],
  },
  { name: 'arg_index', kind: 'number', min: 0, max: UINT32_MAX },
  {
    name: 'func', kind: 'text', format: 'func', placeholder: 'name or id',
    title: "a kernel's name in the capture's kernel table, or its func id",
  },
  { name: 'step', kind: 'number', min: 0, max: UINT32_MAX },
  { name: 'overflow', kind: 'bool', optional: true },
  { name: 'has_nonfinite', kind: 'bool', optional: true },
  { name: 'func_unknown', kind: 'bool', optional: false, label: 'func unknown', title: 'records whose func_ids are unknown' },
  { name: 'page_size', kind: 'number', min: 1, max: 1000, default: 100 },
];

/** The fields' names, in the order they appear in the hash. */
export const FILTER_NAMES = FILTER_FIELDS.map((f) => f.name);

/** The values an enum or optional bool field takes ('' is any); null for the others. */
export function choicesOf(field) {
  if (field.kind === 'enum') return field.values;
  if (field.kind === 'bool' && field.optional) return ['true', 'false'];
  return null;
}

export function emptyFilters(fields = FILTER_FIELDS) {
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
  dtype(raw) {
    const dtype = String(raw || '').trim().toLowerCase().replace(/^dtype_/, '');
    if (dtype && !/^[a-z0-9]+$/.test(dtype)) throw new Error(`dtype "${dtype}" is not a dtype name`);
    return dtype;
  },
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
export function normalizeFilters(raw, fields = FILTER_FIELDS) {
  const f = emptyFilters(fields);
  for (const field of fields) f[field.name] = normalizeField(field, raw[field.name]);
  return f;
}

/** The query parameters of normalised filters: the ones set. */
export function queryParams(f, fields = FILTER_FIELDS) {
  const p = {};
  for (const { name } of fields) if (f[name] !== '') p[name] = f[name];
  return p;
}

/** What a form shows for a normalised value (a number field its default when unset). */
export function formValue(field, value) {
  if (field.kind === 'number' && field.default !== undefined) return value || String(field.default);
  return value || '';
}
