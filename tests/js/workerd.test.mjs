// The package inside workerd (Miniflare): the workerd entry loads both wasm modules as compiled
// modules, and the Durable Object and R2 stores pass the contract over their real bindings.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

import { workerdWith } from '../runtimes/workerd.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

let mf;
before(async () => {
  mf = workerdWith('tests/workerd/contract-worker.mjs');
});
after(() => mf?.dispose());

for (const store of ['do', 'r2']) {
  test(`${store === 'do' ? 'DurableObjectStore' : 'R2Store'} passes the store contract inside workerd`, async () => {
    const response = await mf.dispatchFetch(`http://worker/contract?store=${store}`);
    assert.equal(response.status, 200, await response.clone().text());
    assert.deepEqual((await response.json()).failures, []);
  });
}

test('the serializer across concurrent requests in workerd: each work runs in its own request, a hung one times out', async () => {
  const started = Date.now();
  const responses = await Promise.all([
    mf.dispatchFetch('http://worker/serialize?n=1'),
    mf.dispatchFetch('http://worker/serialize?n=2&hang=1'),
    mf.dispatchFetch('http://worker/serialize?n=3'),
    mf.dispatchFetch('http://worker/serialize?n=4'),
  ]);
  const bodies = await Promise.all(responses.map((response) => response.json()));
  assert.deepEqual(responses.map((response) => response.status), [200, 503, 200, 200]);
  assert.deepEqual(bodies, [
    { text: '1', aborted: false },
    { timedOut: 'k' },
    { text: '3', aborted: false },
    { text: '4', aborted: false },
  ]);
  assert.ok(Date.now() - started >= 600, 'the hung work held the key until its deadline');
});

test('the request of a hung work hears its timeout in workerd, round after round on one isolate, never cancelled as hung', async () => {
  for (let round = 0; round < 8; round++) {
    const responses = await Promise.all([1, 2, 3].map((n) => mf.dispatchFetch(`http://worker/serialize?n=${round}-${n}${n === 2 ? '&hang=1' : ''}`)));
    const bodies = await Promise.all(responses.map((response) => response.text()));
    assert.deepEqual(responses.map((response) => response.status), [200, 503, 200], `round ${round}: ${bodies.join(' | ')}`);
  }
});

test('concurrency 3 across concurrent requests in workerd: at most three run at once, started in call order, each in its own request', async () => {
  const responses = await Promise.all(Array.from({ length: 40 }, (_, n) => mf.dispatchFetch(`http://worker/concurrency?n=${n}`)));
  const bodies = await Promise.all(responses.map((response) => response.json()));
  assert.ok(responses.every((response) => response.status === 200));
  assert.ok(bodies.every(({ slot }) => slot >= 0 && slot < 3), JSON.stringify(bodies));
  const log = await (await mf.dispatchFetch('http://worker/concurrency-log')).json();
  assert.deepEqual(log.starts, log.calls, 'started in the order the calls reached the serializer');
  assert.equal(log.overlaps, 0, 'no two running works shared a slot');
  assert.equal(log.most, 3);
  assert.equal(log.running, 0);
  assert.equal(log.pending, 0);
});

test('works that queue works at once in workerd, started from another request: each call answers its own', async () => {
  const responses = await Promise.all(Array.from({ length: 6 }, (_, n) => mf.dispatchFetch(`http://worker/nested?n=${n}`)));
  const bodies = await Promise.all(responses.map((response) => response.json()));
  assert.deepEqual(
    bodies.map(({ answers }) => answers),
    Array.from({ length: 6 }, (_, n) => [String(n), `inner-${n}`, `shared-${n}`]),
  );
});

// workerd allows 10 000 active timeouts per request: one request with far more works than that
// must run them all (a deadline timer lives only while its work runs), and a request that used
// up its own quota gets an answer — the isolate serves the next request either way.
test('workerd at its limits: 100 000 works in one request, on 1 key and on 1000 keys', async () => {
  const limits = workerdWith('tests/workerd/limits-worker.mjs');
  try {
    for (const keys of [1, 1000]) {
      const response = await limits.dispatchFetch(`http://worker/serialize?works=100000&keys=${keys}`);
      const body = await response.json();
      assert.deepEqual({ ...body, ms: undefined }, { works: 100000, keys, ms: undefined, outOfOrder: 0, overlaps: 0, failed: 0, pending: 0 });
    }
    const filled = await (await limits.dispatchFetch('http://worker/fill-timers')).json();
    assert.equal(filled.armed, 10000, 'the request used up its quota');
    assert.match(filled.refusal, /QuotaExceededError/);
    assert.ok('value' in filled.outcome || /QuotaExceededError/.test(filled.outcome.error), JSON.stringify(filled.outcome));
    assert.equal(filled.pending, 0);
    const next = await (await limits.dispatchFetch('http://worker/serialize?works=50&keys=5')).json();
    assert.equal(next.failed, 0, 'the isolate serves the next request');
    // Lock waiters in one isolate share one timer: 20 000 contenders for one name in one request
    // (twice workerd's timer quota) each get their turn, in order of fences, one at a time.
    const locks = await (await limits.dispatchFetch('http://worker/lock?contenders=20000')).json();
    assert.deepEqual({ ...locks, ms: undefined }, { contenders: 20000, held: 20000, overlaps: 0, fencesRising: true, failed: 0, ms: undefined });
    const after = await (await limits.dispatchFetch('http://worker/lock?contenders=10')).json();
    assert.equal(after.held, 10, 'and the next request');
  } finally {
    await limits.dispose();
  }
});

test('no timer outlives what it serves in workerd: after a burst of works, locks and waiters, none is live', async () => {
  const timers = workerdWith('tests/workerd/timers-worker.mjs');
  try {
    const { armed, afterOneWaiter, live } = await (await timers.dispatchFetch('http://worker/')).json();
    assert.ok(armed > 40, `${armed} timers armed`);
    assert.equal(afterOneWaiter, 0, 'timers live after one waiter was served');
    assert.equal(live, 0, `${live} of ${armed} timers still live`);
  } finally {
    await timers.dispose();
  }
});

// The usual mistakes, with real bindings, each refused with the fix in its message.
for (const compatibilityDate of ['2025-09-01', '2024-01-01']) {
  test(`the usual mistakes with real bindings are named (compatibility date ${compatibilityDate})`, async () => {
    const misuse = new Miniflare({
      modules: true,
      modulesRoot: root,
      scriptPath: fileURLToPath(new URL('../workerd/misuse-worker.mjs', import.meta.url)),
      modulesRules: [
        { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
        { type: 'CompiledWasm', include: ['**/*.wasm'] },
      ],
      compatibilityDate,
      cf: false,
      kvNamespaces: ['KV'],
      durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
    });
    try {
      const { kvAsBucket, stubAsNamespace, rpc } = await (await misuse.dispatchFetch('http://worker/misuse')).json();
      assert.equal(kvAsBucket.name, 'TypeError');
      assert.match(kvAsBucket.message, /^keyturn: bucket is a Workers KV namespace, which has no conditional put .* Use a store with a conditional put: a Durable Object, R2, Redis or Deno KV\.$/);
      assert.equal(stubAsNamespace.name, 'TypeError');
      assert.match(stubAsNamespace.message, /namespace is a Durable Object stub, not a namespace: pass the binding itself \(env\.LOCKS\)/);
      if (compatibilityDate < '2024-04-03') {
        assert.equal(rpc.name, 'LockStoreError');
        assert.match(rpc.message, /^store\.create failed: keyturn: the Durable Object namespace's objects have no RPC method create: .* compatibility_date 2024-04-03 or later/);
      } else {
        assert.equal(rpc, null, 'the lock works');
      }
    } finally {
      await misuse.dispose();
    }
  });
}
