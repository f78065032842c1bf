// The serializer's test files run in both modes by construction: each file in
// tests/js/serializer/ defines its tests through `forEachMode` (modes.mjs). This holds a new
// file to that, so none runs in one mode only unseen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';

test('every serializer test file defines its tests in both modes', () => {
  const folder = new URL('./serializer/', import.meta.url);
  const files = readdirSync(folder).filter((file) => file.endsWith('.test.mjs'));
  assert.ok(files.length >= 6, String(files));
  for (const file of files) {
    const source = readFileSync(new URL(file, folder), 'utf8');
    assert.match(source, /import \{[^}]*\bforEachMode\b[^}]*\} from '\.\.\/modes\.mjs'/, `${file} imports forEachMode`);
    assert.match(source, /^forEachMode\(/m, `${file} defines its tests in forEachMode`);
    assert.doesNotMatch(source, /^test\(/m, `${file} defines no test outside forEachMode`);
  }
});
