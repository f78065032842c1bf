// The example worker end to end in workerd: bundled by wrangler as for deployment, run by
// Miniflare as two workers (two isolates) sharing the Durable Object namespace and the bucket.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';
import { assertFence } from './support.mjs';
import { startUpstream } from '../runtimes/upstream.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'keyturn-worker-'));
let mf;

// The exports' slow upstream (worker/src/exports.js), for both isolates.
let upstream;

before(async () => {
  upstream = await startUpstream();
  execFileSync(join(root, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--outdir', out], {
    cwd: root,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    stdio: 'pipe',
  });
  const worker = (name, locks) => ({
    name,
    modules: true,
    modulesRoot: out,
    scriptPath: join(out, 'index.js'),
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    bindings: { CLAIM_WAIT_MS: '20000', LOCK_STALE_MS: '2000', TEST_HOOKS: '1', EXPORT_WAIT_MS: '20000', UPSTREAM_URL: `http://127.0.0.1:${upstream.port}` },
    r2Buckets: { BUCKET: 'keyturn-example' },
    durableObjects: { LOCKS: locks },
  });
  mf = new Miniflare({
    cf: false,
    workers: [
      worker('a', { className: 'LockDurableObject', useSQLite: true }),
      worker('b', { className: 'LockDurableObject', scriptName: 'a', useSQLite: true }),
    ],
  });
});

after(async () => {
  await mf?.dispose();
  upstream?.close();
  rmSync(out, { recursive: true, force: true });
});

// Miniflare's getWorker gives each of the two workers its own fetch.
async function fetchFrom(name, path, init) {
  const worker = await mf.getWorker(name);
  return worker.fetch(`http://worker${path}`, init);
}

const claimFrom = (name, board, card) =>
  fetchFrom(name, `/boards/${board}/claims`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card }) });

async function countStatuses(responses) {
  const counts = {};
  for (const response of responses) {
    counts[response.status] = (counts[response.status] ?? 0) + 1;
    await response.arrayBuffer();
  }
  return counts;
}

test('50 concurrent claims on one lane: exactly 3 × 201 and 47 × 409, and the board holds those 3', async () => {
  const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => claimFrom('a', 'one', `card-${i}`)));
  const admitted = [];
  for (const response of responses) if (response.status === 201) admitted.push((await response.clone().json()).card);
  assert.deepEqual(await countStatuses(responses), { 201: 3, 409: 47 });
  const board = await (await fetchFrom('a', '/boards/one')).json();
  assert.deepEqual([...board.inProgress].sort(), admitted.sort());
});

test('the same across two worker isolates sharing the Durable Object namespace', async () => {
  const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => claimFrom(i % 2 ? 'b' : 'a', 'two', `card-${i}`)));
  assert.deepEqual(await countStatuses(responses), { 201: 3, 409: 47 });
  const board = await (await fetchFrom('b', '/boards/two')).json();
  assert.equal(board.inProgress.length, 3);
});

test('200 concurrent notifications on one object, split across two isolates, lose no update; fences rise', async () => {
  const responses = await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      fetchFrom(i % 2 ? 'b' : 'a', '/objects/order-1/notifications', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ delta: i + 1 }),
      }),
    ),
  );
  assert.deepEqual(await countStatuses(responses.map((r) => r.clone())), { 200: 200 });
  const states = await Promise.all(responses.map((r) => r.json()));
  states.sort((a, b) => a.notifications - b.notifications);
  assert.deepEqual(states.map((state) => state.notifications), Array.from({ length: 200 }, (_, i) => i + 1), 'each saw the one before');
  assert.equal(states[199].total, (200 * 201) / 2);
  assert.ok(states.every((state, i) => i === 0 || state.fence > states[i - 1].fence), 'each turn\'s fence above the one before');
});

test('notifications alternating between isolates each build on every one before', async () => {
  const sequence = ['a', 'b', 'a', 'a', 'b', 'b', 'a'];
  let expected = 0;
  for (const [i, from] of sequence.entries()) {
    const delta = 10 ** i;
    expected += delta;
    const response = await fetchFrom(from, '/objects/alternating/notifications', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ delta }),
    });
    assert.equal(response.status, 200, `notification ${i + 1}, from isolate ${from}`);
    const state = await response.json();
    assert.equal(state.total, expected, `notification ${i + 1}, from isolate ${from}, saw every one before`);
    assert.equal(state.notifications, i + 1);
  }
});

test('a notification is decided on the object as it is, whichever isolate wrote it last', async () => {
  const notify = (from, delta) =>
    fetchFrom(from, '/objects/near-the-edge/notifications', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delta }) });
  const edge = Number.MAX_SAFE_INTEGER;
  assert.equal((await notify('a', edge - 1)).status, 200);
  assert.equal((await notify('b', -10)).status, 200);
  // Isolate a wrote edge - 1, where + 5 would leave the exact integers; the object is now at edge - 11.
  const response = await notify('a', 5);
  assert.equal(response.status, 200);
  assert.equal((await response.json()).total, edge - 6);
});

test('a notification that would carry the total past 2^53 - 1 is refused with 422 and writes nothing', async () => {
  const post = (delta) =>
    fetchFrom('a', '/objects/huge/notifications', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delta }) });
  assert.equal((await post(Number.MAX_SAFE_INTEGER)).status, 200);
  const refused = await post(Number.MAX_SAFE_INTEGER);
  assert.equal(refused.status, 422);
  const bucket = await mf.getR2Bucket('BUCKET', 'a');
  assert.equal((await (await bucket.get('objects/huge.json')).json()).total, Number.MAX_SAFE_INTEGER);
});

test('a holder that died mid-claim is taken over after staleMs, and its late write is refused by fence', async () => {
  // The dead holder: a held record with fence 1, written 10 s ago, that nobody will release.
  const locks = await mf.getDurableObjectNamespace('LOCKS', 'a');
  const name = 'board:three';
  const stub = locks.get(locks.idFromName(`keyturn-lock:${name}`));
  const dead = JSON.stringify({ keyturn: 1, state: 'held', token: 'dead', fence: 1, at: Date.now() - 10000, lease: 2000 });
  assert.equal(typeof (await stub.create(name, dead)), 'string');
  const from = Date.now();
  const response = await claimFrom('a', 'three', 'card-1');
  assert.equal(response.status, 201);
  const { fence } = await response.json();
  assertFence(fence, 1, from, Date.now(), 'taken over: the fence rose past the dead holder, to the clock\'s:');
  // The dead holder wakes up and writes with its fence 1: refused.
  const late = await fetchFrom('a', '/test/boards/three/late-write', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ fence: 1, card: 'late-card' }),
  });
  assert.equal(late.status, 409);
  const board = await (await fetchFrom('a', '/boards/three')).json();
  assert.deepEqual(board.inProgress, ['card-1']);
  assert.equal(board.fence, fence);
});

test('bad input gets a 4xx with a JSON error, and nothing is written', async () => {
  const cases = [
    ['/nowhere', { method: 'GET' }, 404],
    ['/boards/four', { method: 'DELETE' }, 405],
    ['/boards/four/claims', { method: 'GET' }, 405],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' }, 400],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' }, 415],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: 'x'.repeat(5000) }) }, 413],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' }, 400],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: 7 }) }, 400],
    ['/boards/four/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: 'bad id!' }) }, 400],
    ['/boards/bad%20board/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: 'c' }) }, 400],
    ['/boards/%E0%A4%A/claims', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ card: 'c' }) }, 400],
    ['/objects/o-1/notifications', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delta: 1.5 }) }, 400],
    ['/objects/o-1/notifications', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({}) }, 400],
    ['/objects/o-1/source', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: true }) }, 405],
    ['/objects/o-1/source', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: 'yes' }) }, 400],
    ['/objects/o-1/source', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"public": tru' }, 400],
    ['/objects/o-1/source', { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: '{"public": true}' }, 415],
    ['/objects/o-1/source', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: true, pad: 'x'.repeat(5000) }) }, 413],
    ['/objects/bad%20id/source', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: true }) }, 400],
    ['/objects/o-1/reconcile', { method: 'GET' }, 405],
    ['/objects/bad%20id/reconcile', { method: 'POST' }, 400],
    ['/objects/o-1/reconcile', { method: 'POST' }, 404],
    ['/objects/o-1/acl', { method: 'GET' }, 404],
    ['/objects/o-1/acl', { method: 'PUT' }, 405],
  ];
  for (const [path, init, status] of cases) {
    const response = await fetchFrom('a', path, init);
    assert.equal(response.status, status, `${init.method} ${path}`);
    assert.equal(typeof (await response.json()).error, 'string');
  }
  const bucket = await mf.getR2Bucket('BUCKET', 'a');
  assert.equal(await bucket.head('boards/four.json'), null, 'no board written');
  assert.equal(await bucket.head('objects/o-1.json'), null, 'no object written');
  assert.equal(await bucket.head('sources/o-1.json'), null, 'no source written');
  assert.equal(await bucket.head('acls/o-1.json'), null, 'no ACL written');
});

const setSource = (name, id, isPublic) =>
  fetchFrom(name, `/objects/${id}/source`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: isPublic }) });

test('300 reconcile notifications per burst, split across two isolates: every answer and the ACL equal the source, in few runs', async () => {
  let runsBefore = 0;
  for (const isPublic of [true, false, true]) {
    const set = await setSource('a', 'doc-1', isPublic);
    assert.deepEqual(await set.json(), { id: 'doc-1', public: isPublic });
    const responses = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        // Half with no body and no content-type; the other half with one: answered alike.
        fetchFrom(i % 2 ? 'b' : 'a', '/objects/doc-1/reconcile', i % 4 < 2 ? { method: 'POST' } : { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'changed' }),
      ),
    );
    assert.deepEqual(await countStatuses(responses.map((r) => r.clone())), { 200: 300 });
    const answers = await Promise.all(responses.map((r) => r.json()));
    assert.ok(answers.every((acl) => acl.id === 'doc-1' && acl.public === isPublic), 'every answer equals the source');
    const acl = await (await fetchFrom('b', '/objects/doc-1/acl')).json();
    assert.equal(acl.public, isPublic);
    const runs = acl.runs - runsBefore;
    assert.ok(runs >= 1 && runs <= 100, `${runs} runs for 300 notifications`);
    assert.ok(answers.every((answer) => answer.fence <= acl.fence && answer.runs <= acl.runs));
    runsBefore = acl.runs;
  }
});

test('exports split across two isolates: at most 2 of a tenant at the upstream at once, both slots used', async () => {
  const tenants = ['t1', 't2'];
  const responses = await Promise.all(
    Array.from({ length: 60 }, (_, i) => fetchFrom(i % 2 ? 'b' : 'a', `/tenants/${tenants[i % 4 < 2 ? 0 : 1]}/exports`, { method: 'POST' })),
  );
  assert.deepEqual(await countStatuses(responses.map((r) => r.clone())), { 200: 60 });
  for (const tenant of tenants) {
    const seen = upstream.tenants.get(tenant);
    assert.equal(seen.calls, 30);
    assert.equal(seen.most, 2, `${tenant}: the most calls at once`);
    assert.equal(seen.refused, 0, `${tenant}: every fence above its slot's last`);
    assert.deepEqual([...seen.fences.keys()].sort(), [0, 1]);
  }
  const fences = new Map();
  for (const { tenant, slot, fence } of (await Promise.all(responses.map((r) => r.json()))).sort((x, y) => x.fence - y.fence)) {
    const key = `${tenant} ${slot}`;
    assert.ok(!fences.has(key) || fences.get(key) < fence);
    fences.set(key, fence);
  }
});
