// The constants and message templates the package exports are the crate's: the build writes
// them from Rust (keyturn-wasm/src/bin/constants.rs). This checks every entry exports exactly the values
// Rust prints now, so a constant written again by hand in the package's JS cannot drift.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

import * as esm from 'keyturn';

const require = createRequire(import.meta.url);
const root = new URL('../..', import.meta.url);

const rust = execFileSync('cargo', ['run', '--quiet', '-p', 'keyturn-wasm', '--bin', 'constants'], { cwd: root, encoding: 'utf8' });
const fromRust = await import(`data:text/javascript;base64,${Buffer.from(rust).toString('base64')}`);

test('the package exports the crate\'s constants, from both entries', () => {
  const cjs = require('keyturn');
  for (const name of ['DEFAULT_TIMEOUT_MS', 'LOCK_WAIT_MS', 'LOCK_STALE_MS']) {
    assert.equal(typeof fromRust[name], 'number', name);
    assert.equal(esm[name], fromRust[name], `import: ${name}`);
    assert.equal(cjs[name], fromRust[name], `require: ${name}`);
  }
  assert.equal(fromRust.DEFAULT_TIMEOUT_MS, 30000, 'keyed-serializer.js\'s');
  assert.equal(fromRust.LOCK_WAIT_MS, 100, 'board-lock.ts\'s');
  assert.equal(fromRust.LOCK_STALE_MS, 2000, 'board-lock.ts\'s');
});

test('the error classes say what the crate\'s templates say', () => {
  const fill = (template, values) => template.replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
  assert.equal(new esm.SerializedWorkTimeout('k', 5).message, fill(fromRust.MESSAGES.timeout, { key: 'k', timeoutMs: 5 }));
  assert.equal(new esm.SerializedQueueFull('k', 3).message, fill(fromRust.MESSAGES.queueFull, { key: 'k', maxPending: 3 }));
  assert.equal(new esm.LockUnavailable('k', 30).message, fill(fromRust.MESSAGES.lockUnavailable, { key: 'k', waitMs: 30 }));
  assert.match(new esm.KeyturnInstanceFailed(new Error('x')).message, /^keyturn's wasm instance failed \(x\)/);
});

test('the types declare every constant the package exports', () => {
  const types = readFileSync(new URL('pkg/index.d.ts', root), 'utf8');
  for (const name of ['DEFAULT_TIMEOUT_MS', 'LOCK_WAIT_MS', 'LOCK_STALE_MS']) assert.match(types, new RegExp(`export const ${name}: number;`));
});

test('loads by import and by require without an init call, with the constants of keyed-serializer.js and board-lock.ts', () => {
  const cjs = require('keyturn');
  assert.equal(typeof cjs.createKeyedSerializer, 'function');
  assert.equal(cjs.DEFAULT_TIMEOUT_MS, 30000);
  assert.equal(esm.DEFAULT_TIMEOUT_MS, 30000);
  assert.equal(new cjs.SerializedWorkTimeout('k', 5).name, 'SerializedWorkTimeout');
});
