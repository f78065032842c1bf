// DenoKvStore on the real Deno KV engine: Deno from the npm registry runs the contract.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const deno = join(root, 'node_modules/.bin/deno');

test('DenoKvStore passes the store contract on Deno KV', { skip: !existsSync(deno) && 'no deno' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyturn-deno-'));
  try {
    const out = execFileSync(deno, ['run', '--quiet', '--no-prompt', '--unstable-kv', `--allow-read=${root},${dir}`, `--allow-write=${dir}`, join(root, 'tests/runtimes/deno-kv.mjs'), join(dir, 'kv.sqlite3')], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(dir, 'deno-dir') },
      encoding: 'utf8',
      timeout: 120000,
    });
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()).failures, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
