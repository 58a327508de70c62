// filters.mjs: the form's fields from the server's filter schema, and what
// they check.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { choicesOf, emptyFilters, fieldsFromSchema, filterFields, filterNames, formValue, normalizeFilters, parseTaskId, queryParams } from '../web/filters.mjs';
import { FIELDS, SCHEMA } from './schema.mjs';

const FILTER_FIELDS = filterFields();
const FILTER_NAMES = filterNames();

const KINDS = new Set(['text', 'number', 'enum', 'bool']);

test('the fields are the schema\'s, in its order, and page_size', () => {
  assert.equal(FILTER_FIELDS, FIELDS);
  assert.deepEqual(FILTER_NAMES, [...SCHEMA.filter.map((f) => f.name), 'page_size']);
  for (const name of ['task_id', 'stage', 'role', 'kind', 'dtype', 'arg_index', 'func', 'step',
    'overflow', 'has_nonfinite', 'func_unknown']) assert.ok(FILTER_NAMES.includes(name), name);
});

test('a field the server adds is in the form; a schema that is not one is refused', () => {
  const more = fieldsFromSchema([...SCHEMA.filter, { name: 'max_numel', kind: 'number', values: [], help: 'at most' }]);
  assert.deepEqual(more.at(-2), { name: 'max_numel', title: 'at most', kind: 'number', min: 0, max: 0xffffffff });
  assert.deepEqual(fieldsFromSchema([{ name: 'x', kind: 'novel' }])[0].kind, 'text');
  assert.throws(() => fieldsFromSchema({}), /no list of filter fields/);
  assert.throws(() => fieldsFromSchema([{ name: '<b>' }]), /without a good name/);
  assert.throws(() => fieldsFromSchema([{ name: 'a' }, { name: 'a' }]), /without a good name/);
  assert.throws(() => fieldsFromSchema([{ name: 'page_size' }]), /without a good name/);
});

test('every descriptor has a name and a known kind with what the kind needs', () => {
  for (const f of FILTER_FIELDS) {
    assert.ok(KINDS.has(f.kind), `${f.name}: kind ${f.kind}`);
    if (f.kind === 'enum') assert.ok(Array.isArray(f.values) && f.values.length > 0, f.name);
    if (f.kind === 'number') assert.ok(Number.isInteger(f.min) && Number.isInteger(f.max), f.name);
    if (f.kind === 'bool') assert.equal(typeof f.optional, 'boolean', f.name);
  }
  assert.deepEqual(choicesOf(FILTER_FIELDS.find((f) => f.name === 'stage')), ['before_dispatch', 'after_completion']);
  assert.deepEqual(choicesOf(FILTER_FIELDS.find((f) => f.name === 'overflow')), ['true', 'false']);
  assert.equal(choicesOf(FILTER_FIELDS.find((f) => f.name === 'func_unknown')), null);
});

test('task ids are hex or decimal, 64 bits', () => {
  assert.equal(parseTaskId(''), '');
  assert.equal(parseTaskId(' 0x100000001 '), '0x0000000100000001');
  assert.equal(parseTaskId('4294967297'), '0x0000000100000001');
  assert.throws(() => parseTaskId('0x10000000000000000'), /not a 64-bit hex/);
  assert.throws(() => parseTaskId('12a'), /task_id "12a" is not a 64-bit hex \(0x...\) or decimal number/);
});

test('values are normalised: enums lower case, numbers canonical, the default page size unset', () => {
  const f = normalizeFilters({
    task_id: '17', stage: 'BEFORE_DISPATCH', role: 'inout', kind: '', dtype: 'Float32',
    arg_index: '007', func: ' 12 ', step: '3', overflow: 'TRUE', has_nonfinite: 'false',
    func_unknown: 'on', page_size: '100',
  });
  assert.deepEqual(f, {
    ...emptyFilters(),
    task_id: '0x0000000000000011', stage: 'before_dispatch', role: 'inout', kind: '', dtype: 'float32',
    arg_index: '7', func: '12', step: '3', overflow: 'true', has_nonfinite: 'false',
    func_unknown: 'true', page_size: '',
  });
  assert.equal(normalizeFilters({ page_size: '5000' }).page_size, '1000');
  assert.equal(normalizeFilters({ page_size: '20' }).page_size, '20');
  assert.equal(normalizeFilters({ func: 'axpb' }).func, 'axpb');
  assert.equal(normalizeFilters({ func_unknown: '' }).func_unknown, '');
  assert.deepEqual(normalizeFilters({}), emptyFilters());
});

test('bad values are refused with a message naming the field', () => {
  const cases = [
    [{ stage: 'sideways' }, 'stage must be one of before_dispatch, after_completion'],
    [{ overflow: 'maybe' }, 'overflow must be one of true, false'],
    [{ dtype: 'float-32' }, /^dtype must be one of float32, /],
    [{ arg_index: '-1' }, 'arg_index must be a 32-bit non-negative integer'],
    [{ step: '4294967296' }, 'step must be a 32-bit non-negative integer'],
    [{ func: '4294967296' }, 'func must be a kernel name or a 32-bit func id'],
    [{ func: 'x'.repeat(129) }, 'func must be a kernel name (at most 128 characters) or a func id'],
    [{ page_size: '0' }, 'page_size must be a positive integer'],
  ];
  for (const [raw, message] of cases) assert.throws(() => normalizeFilters(raw), { message });
});

test('query parameters are the fields set; a form shows the page size default', () => {
  const f = { ...emptyFilters(), stage: 'before_dispatch', step: '0' };
  assert.deepEqual(queryParams(f), { stage: 'before_dispatch', step: '0' });
  const pageSize = FILTER_FIELDS.find((x) => x.name === 'page_size');
  assert.equal(formValue(pageSize, ''), '100');
  assert.equal(formValue(pageSize, '20'), '20');
  assert.equal(formValue(FILTER_FIELDS.find((x) => x.name === 'task_id'), ''), '');
});
