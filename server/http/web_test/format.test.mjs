// format.mjs: how numbers, bytes, task ids, enum names and scalars print.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fmtBytes, fmtNum, fmtValue, scalarText, shapeStr, short, stageShort, taskHex, toNum } from '../web/format.mjs';

test('toNum reads the JSON spellings of non-finite values and decimal strings', () => {
  assert.equal(toNum(null), null);
  assert.equal(toNum(undefined), null);
  assert.equal(toNum('Infinity'), Infinity);
  assert.equal(toNum('-Infinity'), -Infinity);
  assert.ok(Number.isNaN(toNum('NaN')));
  assert.equal(toNum('12'), 12);
  assert.equal(toNum(1.5), 1.5);
});

test('fmtNum prints integers in full and floats to 6 significant digits', () => {
  assert.equal(fmtNum(null), '—');
  assert.equal(fmtNum('NaN'), 'NaN');
  assert.equal(fmtNum('Infinity'), '+Inf');
  assert.equal(fmtNum('-Infinity'), '-Inf');
  assert.equal(fmtNum(42), '42');
  assert.equal(fmtNum(-7), '-7');
  assert.equal(fmtNum(0.1), '0.1');
  assert.equal(fmtNum(1 / 3), '0.333333');
  assert.equal(fmtNum(2.5), '2.5');
  assert.equal(fmtNum(1e20), '1e+20');
  assert.equal(fmtNum(1.5e-7), '1.5e-7');
  assert.equal(fmtValue(undefined), 'not captured');
  assert.equal(fmtValue(3), '3');
});

test('fmtBytes uses binary units with three significant digits', () => {
  assert.equal(fmtBytes(undefined), '0 B');
  assert.equal(fmtBytes(1023), '1023 B');
  assert.equal(fmtBytes(1024), '1.00 KiB');
  assert.equal(fmtBytes(1536), '1.50 KiB');
  assert.equal(fmtBytes(50 * 1024 * 1024), '50.0 MiB');
  assert.equal(fmtBytes(300 * 1024 ** 3), '300 GiB');
  assert.equal(fmtBytes('12'), '12 B');
});

test('taskHex prints 64-bit ids as 16 hex digits, exactly', () => {
  assert.equal(taskHex('4294967297'), '0x0000000100000001');
  assert.equal(taskHex('18446744073709551615'), '0xffffffffffffffff');
  assert.equal(taskHex(0), '0x0000000000000000');
  assert.equal(taskHex('not a number'), 'not a number');
});

test('enum names lose their prefix', () => {
  assert.equal(short('ROLE_INOUT', 'ROLE_'), 'inout');
  assert.equal(short(undefined, 'ROLE_'), '');
  assert.equal(stageShort('STAGE_BEFORE_DISPATCH'), 'before');
  assert.equal(stageShort('STAGE_AFTER_COMPLETION'), 'after');
  assert.equal(stageShort('STAGE_UNSPECIFIED'), 'unspecified');
  assert.equal(shapeStr(['3', '4']), '3x4');
  assert.equal(shapeStr([]), '()');
});

test('64-bit integer scalars come from their bits, others from scalar_value', () => {
  assert.equal(scalarText({ dtype: 'DTYPE_INT64', scalar_bits: '18446744073709551615' }), '-1');
  assert.equal(scalarText({ dtype: 'DTYPE_UINT64', scalar_bits: '18446744073709551615' }), '18446744073709551615');
  assert.equal(scalarText({ dtype: 'DTYPE_FLOAT16', scalar_value: 0.1 }), '0.1');
  assert.equal(scalarText({ dtype: 'DTYPE_FLOAT32', scalar_value: 'NaN' }), 'NaN');
  assert.equal(scalarText({ dtype: 'DTYPE_FP4E2M1' }), '(no decoder for this dtype)');
});
