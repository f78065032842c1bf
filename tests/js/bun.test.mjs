// Bun's own test runner on the package: `bun test` of tests/bun/ in a project on the packed
// tarball (Bun resolves 'keyturn' by its "node" condition), its workers included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { installTarball, root } from './installed.mjs';

const bun = join(root, 'node_modules/.bin/bun');

test('bun test: Bun.serve under the serializer, and two Bun workers under withLock over bun:sqlite', { skip: !existsSync(bun) && 'no bun', timeout: 180000 }, () => {
  const work = mkdtempSync(join(tmpdir(), 'keyturn-bun-'));
  try {
    const { project } = installTarball(work);
    for (const file of readdirSync(join(root, 'tests/bun'))) copyFileSync(join(root, 'tests/bun', file), join(project, file));
    const result = spawnSync(bun, ['test', './serve.test.mjs'], { cwd: project, encoding: 'utf8', timeout: 120000, env: { ...process.env, NO_COLOR: '1' } });
    const said = `${result.stdout}${result.stderr}`;
    assert.equal(result.status, 0, said);
    assert.match(said, /\b2 pass\b/);
    assert.match(said, /\b0 fail\b/);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
