// Every module of the page loads: its imports resolve and name exports
// that exist (a browser would refuse the whole page otherwise). Modules
// touch the DOM only when called, so node can load them all.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';

const web = new URL('../web/', import.meta.url);

test('every .mjs module links', async () => {
  const modules = readdirSync(web).filter((f) => f.endsWith('.mjs'));
  assert.ok(modules.includes('main.mjs'), modules.join(' '));
  for (const m of modules) await import(new URL(m, web).href);
});
