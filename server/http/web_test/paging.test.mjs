// paging.mjs: the page token stack behind Prev and Next.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageTokens } from '../web/paging.mjs';

test('Next needs a next token, Prev a previous page', () => {
  const p = new PageTokens();
  assert.equal(p.current(), '');
  assert.equal(p.page, 1);
  assert.equal(p.hasPrev, false);
  assert.equal(p.hasNext, false);
  assert.equal(p.forward(), false);
  assert.equal(p.back(), false);
  p.next = 't2';
  assert.equal(p.hasNext, true);
  assert.equal(p.forward(), true);
  assert.equal(p.current(), 't2');
  assert.equal(p.page, 2);
  assert.equal(p.hasPrev, true);
  p.next = 't3';
  p.forward();
  assert.deepEqual(p.tokens, ['', 't2', 't3']);
  assert.equal(p.back(), true);
  assert.equal(p.current(), 't2');
  p.reset();
  assert.deepEqual(p.tokens, ['']);
  assert.equal(p.next, '');
});
