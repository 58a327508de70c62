// url_state.mjs: the location hash of a view, and API URLs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { emptyFilters } from '../web/filters.mjs';
import './schema.mjs';
import { apiUrl, hashFor, parseHash, parseIndex, sameIndex } from '../web/url_state.mjs';

test('API URLs carry the parameters that are set', () => {
  assert.equal(apiUrl('v1/captures', {}), 'v1/captures');
  assert.equal(apiUrl('v1/captures', { page_size: 100, page_token: '', state: undefined, label: 'a=b' }),
    'v1/captures?page_size=100&label=a%3Db');
});

test('a view and its hash round-trip', () => {
  const query = { ...emptyFilters(), task_id: '0x0000000100000001', stage: 'after_completion' };
  const hash = hashFor({ capture: 'run 1', query, record: { id: '2', index: [0, 3] } });
  assert.equal(hash, '#capture=run%201&task_id=0x0000000100000001&stage=after_completion&record=2&index=0,3');
  const back = parseHash(hash);
  assert.equal(back.capture, 'run 1');
  assert.equal(back.token, null);
  assert.deepEqual(back.filters, query);
  assert.equal(back.record, '2');
  assert.deepEqual(back.index, [0, 3]);
});

test('an empty view has no hash; an empty hash no selection', () => {
  assert.equal(hashFor({ capture: null, query: emptyFilters(), record: null }), '');
  const p = parseHash('');
  assert.equal(p.capture, null);
  assert.equal(p.record, null);
  assert.equal(p.index, null);
  assert.deepEqual(p.filters, emptyFilters());
  assert.equal(parseHash('#token=abc').token, 'abc');
});

test('the job view keeps its job in the hash', () => {
  const hash = hashFor({ job: 'train 1', capture: null, query: emptyFilters(), record: null });
  assert.equal(hash, '#job=train%201');
  assert.equal(parseHash(hash).job, 'train 1');
  assert.equal(parseHash('#capture=a').job, null);
});

test('slice indices', () => {
  assert.equal(parseIndex(''), null);
  assert.equal(parseIndex('1,x'), null);
  assert.deepEqual(parseIndex('1, 2'), [1, 2]);
  assert.ok(sameIndex(null, []));
  assert.ok(sameIndex([1, 2], [1, 2]));
  assert.ok(!sameIndex([1], [2]));
});
