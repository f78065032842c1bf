// The Rust worker of examples/rust-worker (workers-rs, built by worker-build) in workerd through
// Miniflare: keyturn's Rust API — StoreSerializer over a Durable Object lock store written in
// Rust — serializes claims on one board. scripts/test.sh builds it first.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

const build = fileURLToPath(new URL('../../examples/rust-worker/build/', import.meta.url));
const built = existsSync(join(build, 'index.js'));
let mf;

before(() => {
  if (!built) return;
  const worker = (name, locks) => ({
    name,
    modules: true,
    modulesRoot: build,
    scriptPath: join(build, 'index.js'),
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    r2Buckets: { BUCKET: 'keyturn-rust-example' },
    durableObjects: { LOCKS: locks },
  });
  mf = new Miniflare({
    cf: false,
    workers: [worker('a', { className: 'LockObject', useSQLite: true }), worker('b', { className: 'LockObject', scriptName: 'a', useSQLite: true })],
  });
});

after(() => mf?.dispose());

async function claims(board, count, workers) {
  const fetchers = await Promise.all(workers.map((name) => mf.getWorker(name)));
  const responses = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      fetchers[i % fetchers.length].fetch(`http://worker/boards/${board}/claims`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: `card-${i}` }) }),
    ),
  );
  const counts = {};
  const bodies = [];
  for (const response of responses) {
    counts[response.status] = (counts[response.status] ?? 0) + 1;
    bodies.push(await response.json());
  }
  return { counts, bodies };
}

const skip = !built && 'examples/rust-worker is not built (scripts/test.sh builds it with worker-build)';

test('Rust worker: 50 concurrent claims on one board give exactly 3 × 201 and 47 × 409', { skip }, async () => {
  const { counts, bodies } = await claims('one', 50, ['a']);
  assert.deepEqual(counts, { 201: 3, 409: 47 });
  const board = await (await (await mf.getWorker('a')).fetch('http://worker/boards/one')).json();
  assert.equal(board.inProgress.length, 3);
  const fences = bodies.filter((body) => body.fence !== undefined).map((body) => body.fence);
  assert.equal(new Set(fences).size, fences.length, 'every claim that got in had its own fence');
});

test('Rust worker: the same split across two isolates sharing the Durable Object namespace', { skip }, async () => {
  const { counts } = await claims('two', 50, ['a', 'b']);
  assert.deepEqual(counts, { 201: 3, 409: 47 });
});

test('Rust worker: bad input gets a 4xx and writes nothing', { skip }, async () => {
  const a = await mf.getWorker('a');
  const response = await a.fetch('http://worker/boards/three/claims', { method: 'POST', body: 'not json' });
  assert.equal(response.status, 400);
  assert.equal((await a.fetch('http://worker/nowhere')).status, 404);
  const board = await (await a.fetch('http://worker/boards/three')).json();
  assert.deepEqual(board.inProgress, []);
});
