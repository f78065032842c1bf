// acquireLock against the built package, with stores written in JS — as users write them.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { acquireLock, lockStats, MemoryStore, LockStoreError, LOCK_WAIT_MS, LOCK_STALE_MS } from 'keyturn';
import { MapStore, record } from './map-store.mjs';
import { assertFence, clockFence, onMockedTime } from './support.mjs';

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));
const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));


test('the constants of board-lock.ts (the lock file keyturn re-implements)', () => {
  assert.equal(LOCK_WAIT_MS, 100);
  assert.equal(LOCK_STALE_MS, 2000);
});

test('a free name is taken, released and taken again: two store calls per acquire+release', async () => {
  const store = new MapStore();
  let from = Date.now();
  const first = await acquireLock(store, 'board:1');
  assert.equal(first.name, 'board:1');
  assert.match(first.token, /^[0-9a-f]{32}$/);
  assertFence(first.fence, 0, from, Date.now(), 'the clock\'s');
  await first.release();
  assert.equal(store.calls, 2);
  let last = first.fence;
  for (let i = 2; i <= 5; i++) {
    const before = store.calls;
    from = Date.now();
    const lock = await acquireLock(store, 'board:1');
    assertFence(lock.fence, last, from, Date.now(), 'above the last, at least the clock\'s');
    last = lock.fence;
    await lock.release();
    await lock.release(); // twice is harmless and asks nothing
    assert.equal(store.calls - before, 2);
  }
  assert.deepEqual(record(store, 'board:1'), { keyturn: 1, state: 'free', token: '', fence: last, at: record(store, 'board:1').at });
});

test('a live holder is waited out for waitMs, then the answer is undefined', async () => {
  const records = new Map();
  const a = new MapStore({ records });
  const b = new MapStore({ records }); // another isolate
  const held = await acquireLock(a, 'k');
  const started = performance.now();
  assert.equal(await acquireLock(b, 'k', { waitMs: 60 }), undefined);
  const waited = performance.now() - started;
  assert.ok(waited >= 59 && waited < 400, `${waited} ms`);
  assert.ok(b.calls <= 14, `polls back off (${b.calls} calls)`);
  await held.release();
});

// The next tests are about a few milliseconds (a poll's pause, a lease of tens of them): on
// mocked time, where the package's timers and clocks move only as the test says.
test('a release within the wait is seen promptly by another isolate', () =>
  onMockedTime(async (clock) => {
    const records = new Map();
    const a = new MapStore({ records });
    const b = new MapStore({ records });
    const held = await clock.settle(acquireLock(a, 'k'));
    const waiting = acquireLock(b, 'k', { waitMs: 2000 });
    await clock.advance(120);
    const releasedAt = clock.now();
    const from = Date.now();
    await clock.settle(held.release());
    const lock = await clock.settle(waiting);
    assertFence(lock.fence, held.fence, from, Date.now());
    assert.ok(clock.now() - releasedAt < 80, 'within a poll or so');
    await clock.settle(lock.release());
  }));

test('a stale record is taken over by CAS, and the late release changes nothing', () =>
  onMockedTime(async (clock) => {
    const records = new Map();
    const dead = await clock.settle(acquireLock(new MapStore({ records }), 'k', { staleMs: 40 }));
    const other = new MapStore({ records });
    assert.equal(await clock.settle(acquireLock(other, 'k', { waitMs: 0, staleMs: 40 })), undefined, 'fresh: kept');
    await clock.advance(60);
    const from = Date.now();
    const taker = await clock.settle(acquireLock(other, 'k', { staleMs: 40 }));
    assertFence(taker.fence, dead.fence, from, Date.now());
    await clock.settle(dead.release()); // late
    const stored = JSON.parse(records.get('k').value);
    assert.equal(stored.state, 'held');
    assert.equal(stored.token, taker.token);
    await clock.settle(taker.release());
  }));

test('a holder in the same isolate that never releases is taken over when stale; its late release changes nothing', () =>
  onMockedTime(async (clock) => {
    const store = new MapStore();
    let dead = await clock.settle(acquireLock(store, 'k', { staleMs: 60 }));
    const deadFence = dead.fence;
    assert.equal(await clock.settle(acquireLock(store, 'k', { waitMs: 10, staleMs: 60 })), undefined, 'live: kept');
    const started = clock.now();
    const from = Date.now();
    const taker = await clock.settle(acquireLock(store, 'k', { waitMs: 1000, staleMs: 60 }));
    const waited = clock.now() - started;
    assert.ok(taker, 'taken over by the waiter here');
    assert.ok(waited >= 30 && waited < 400, `taken once stale (${waited} ms)`);
    assertFence(taker.fence, deadFence, from, Date.now());
    await clock.settle(dead.release()); // late: the record is the taker's
    assert.equal(record(store, 'k').token, taker.token);
    assert.equal(record(store, 'k').state, 'held');
    dead = undefined;
    await clock.settle(taker.release());
    const againFrom = Date.now();
    const again = await clock.settle(acquireLock(store, 'k', { waitMs: 0 }));
    assertFence(again.fence, taker.fence, againFrom, Date.now(), 'the line is free again:');
    await clock.settle(again.release());
  }));

test('a lock keeps its name, token and fence after release; a second release asks nothing', async () => {
  const store = new MapStore();
  const name = 'board:' + 'x'.repeat(3);
  const lock = await acquireLock(store, name);
  const { token, fence } = lock;
  await lock.release();
  const calls = store.calls;
  await Promise.all([lock.release(), lock.release()]);
  assert.equal(store.calls, calls);
  assert.deepEqual([lock.name, lock.token, lock.fence], [name, token, fence]);
  assert.deepEqual(Object.keys(lock), [], 'no writable own properties');
  assert.throws(() => { lock.fence = 99; }, TypeError);
});

test('many acquisitions in one microtask run keep nothing per lock once released', async () => {
  // Locks are plain JS objects: nothing waits for a finalizer, which never runs while the
  // microtask queue is busy. (When each lock had one, its wasm memory stayed until then —
  // about 300 bytes a cycle — and the cycles slowed without bound.)
  const store = new MemoryStore();
  const cycles = async (n) => {
    for (let i = 0; i < n; i++) await (await acquireLock(store, 'k')).release();
  };
  await cycles(5000);
  const before = process.memoryUsage().external;
  await cycles(100000);
  const grown = process.memoryUsage().external - before;
  assert.ok(grown < 4e6, `${grown} bytes more outside the JS heap after 100 000 cycles`);
});

test('options.now drives staleness', async () => {
  const records = new Map();
  let clock = 1_000_000;
  const now = () => clock;
  await acquireLock(new MapStore({ records }), 'k', { now });
  clock += 2001;
  const taker = await acquireLock(new MapStore({ records }), 'k', { now });
  assert.equal(taker.fence, clockFence(clock), 'taken over without waiting 2 s of real time, at the fence of its clock');
});

test('a record that is not ours is never released, and taken over only when unchanged for staleMs', () =>
  // On mocked time: a wait of 30 ms against 50 ms of watching is exact.
  onMockedTime(async (clock) => {
    const store = new MapStore();
    store.records.set('k', { value: '{"pid":1,"token":"the seed"}', version: 'v0' });
    assert.equal(await clock.settle(acquireLock(store, 'k', { waitMs: 30, staleMs: 50 })), undefined);
    const lock = await clock.settle(acquireLock(store, 'k', { waitMs: 200, staleMs: 50 }));
    assert.ok(lock.fence >= clockFence(Date.now() - 200), 'a lost fence restarts at the clock\'s');
    store.records.set('k', { value: 'overwritten by something else', version: 'v9' });
    await clock.settle(lock.release());
    assert.equal(store.records.get('k').value, 'overwritten by something else');
  }));

test('store failures reject with LockStoreError carrying the cause; never a busy answer', async () => {
  const cause = new Error('connection reset');
  const cases = [
    [{ create: async () => { throw cause; }, read: async () => null, replace: async () => null }, /store\.create failed: connection reset/],
    [{ create() { throw cause; }, read: async () => null, replace: async () => null }, /store\.create failed/],
    [{ create: async () => null, read: async () => { throw cause; }, replace: async () => null }, /store\.read failed/],
    [{ create: async () => 42, read: async () => null, replace: async () => null }, /store\.create answered a number/],
    [{ create: async () => null, read: async () => ({ value: 1 }), replace: async () => null }, /store\.read answered/],
  ];
  for (const [store, message] of cases) {
    const error = await acquireLock(store, 'k').catch((e) => e);
    assert.ok(error instanceof LockStoreError, String(error));
    assert.equal(error.name, 'LockStoreError');
    assert.match(error.message, message);
  }
  const error = await acquireLock(cases[0][0], 'k').catch((e) => e);
  assert.equal(error.cause, cause);
  // A failing release is reported too.
  const store = new MapStore();
  const lock = await acquireLock(store, 'k');
  store.failRate = 1;
  await assert.rejects(lock.release(), LockStoreError);
});

test('a first call or release that fails leaves the local line: the next acquisition goes on', async () => {
  // replace throws synchronously while `broken`: the CAS on a record this isolate freed (the
  // uncontended first call) and the release's CAS both go through it.
  class Breakable extends MapStore {
    replace(key, version, value) {
      if (this.broken) throw new Error('sync boom');
      return super.replace(key, version, value);
    }
  }
  const store = new Breakable();
  await (await acquireLock(store, 'k')).release();
  store.broken = true;
  await assert.rejects(acquireLock(store, 'k'), /store\.replace failed: sync boom/);
  store.broken = false;
  const held = await acquireLock(store, 'k', { waitMs: 0 });
  assert.ok(held, 'the failed first call left the line and held nothing');
  const waiter = acquireLock(store, 'k', { waitMs: 5000, staleMs: 200 });
  store.broken = true;
  await assert.rejects(held.release(), (error) => error instanceof LockStoreError && /sync boom/.test(error.message));
  store.broken = false;
  // The record is still held by `held`'s token: the waiter takes it over once stale.
  const next = await waiter;
  assert.ok(next && next.fence > held.fence);
  await next.release();
  assert.equal(record(store, 'k').state, 'free');
});

test('a store method or now() that acquires and releases other locks, synchronously, does not confuse either acquisition', async () => {
  // The package's JS tracks which store call the lock module made last; calls nested inside a
  // store method or `now` must not be taken for the outer one.
  const nested = [];
  class Reentrant extends MapStore {
    create(key, value) {
      if (key === 'outer') nested.push(acquireLock(this, 'inner-create'));
      return super.create(key, value);
    }
    replace(key, version, value) {
      if (key === 'outer') nested.push(acquireLock(this, `inner-replace-${nested.length}`).then((lock) => lock.release().then(() => lock)));
      return super.replace(key, version, value);
    }
  }
  const store = new Reentrant();
  let calls = 0;
  const now = () => {
    calls += 1;
    if (calls === 3) nested.push(acquireLock(store, 'inner-now', { now }));
    return Date.now();
  };
  const started = Date.now();
  let last = 0;
  for (let i = 1; i <= 3; i++) {
    const from = Date.now();
    const lock = await acquireLock(store, 'outer', { now });
    assert.equal(lock.name, 'outer');
    assertFence(lock.fence, last, from, Date.now());
    last = lock.fence;
    assert.equal(record(store, 'outer').token, lock.token);
    await lock.release();
    assert.equal(record(store, 'outer').state, 'free');
  }
  const inner = await Promise.all(nested);
  // One from the create, one from `now`, five from the outer CASes (three releases, two acquisitions).
  assert.equal(inner.length, 7);
  assert.equal(new Set(inner.map((lock) => lock.name)).size, 7);
  assert.ok(inner.some((lock) => lock.name === 'inner-create') && inner.some((lock) => lock.name === 'inner-now'));
  for (const lock of inner) {
    assertFence(lock.fence, 0, started, Date.now(), 'a first acquisition\'s');
    await lock.release();
    assert.equal(record(store, lock.name).state, 'free');
  }
});

test('bad input: TypeError or RangeError naming the argument, and nothing asked of the store', async () => {
  const store = new MapStore();
  const cases = [
    [null, 'k', undefined, TypeError, /store/],
    [{}, 'k', undefined, TypeError, /store\.create/],
    [{ create() {}, read() {} }, 'k', undefined, TypeError, /store\.replace/],
    [store, '', undefined, TypeError, /name/],
    [store, 7, undefined, TypeError, /name/],
    [store, 'x'.repeat(513), undefined, RangeError, /name/],
    [store, 'board:\uD800', undefined, TypeError, /name.*surrogate/],
    [store, 'k', null, TypeError, /options/],
    [store, 'k', { waitMs: '1' }, TypeError, /waitMs/],
    [store, 'k', { waitMs: -1 }, RangeError, /waitMs/],
    [store, 'k', { staleMs: 0 }, RangeError, /staleMs/],
    [store, 'k', { staleMs: Infinity }, RangeError, /staleMs/],
    [store, 'k', { now: 'later' }, TypeError, /now/],
  ];
  for (const [s, name, options, type, pattern] of cases) {
    await assert.rejects(acquireLock(s, name, options), (e) => e instanceof type && pattern.test(e.message), `${pattern}`);
  }
  assert.equal(store.calls, 0);
  // A real U+FFFD is a name like any other (a lone surrogate arrives in wasm as one too).
  const lock = await acquireLock(store, 'board:\uFFFD');
  assert.equal(lock.name, 'board:\uFFFD');
  await lock.release();
  assert.equal(record(store, 'board:\uFFFD').state, 'free');
});

test('a Workers KV namespace is refused, saying why and what to use', async () => {
  const kv = { get() {}, getWithMetadata() {}, put() {}, list() {}, delete() {} };
  await assert.rejects(acquireLock(kv, 'k'), (e) => e instanceof TypeError && /Workers KV/.test(e.message) && /conditional put/.test(e.message) && /Durable Object/.test(e.message));
});

test('MemoryStore: create only if absent, read, replace only on the current version', async () => {
  const store = new MemoryStore();
  const v1 = await store.create('k', 'one');
  assert.equal(typeof v1, 'string');
  assert.equal(await store.create('k', 'again'), null);
  assert.deepEqual(await store.read('k'), { value: 'one', version: v1 });
  assert.equal(await store.read('missing'), null);
  const v2 = await store.replace('k', v1, 'two');
  assert.notEqual(v2, v1);
  assert.equal(await store.replace('k', v1, 'stale'), null);
  assert.equal(await store.replace('missing', v1, 'x'), null);
  assert.deepEqual(await store.read('k'), { value: 'two', version: v2 });
  await assert.rejects(store.create(5, 'x'), TypeError);
  await assert.rejects(store.replace('k', 5, 'x'), TypeError);
  const from = Date.now();
  const lock = await acquireLock(store, 'lock');
  assertFence(lock.fence, 0, from, Date.now());
  await lock.release();
});

test('await using: Symbol.asyncDispose releases', async () => {
  const store = new MapStore();
  const lock = await acquireLock(store, 'k');
  assert.equal(typeof lock[Symbol.asyncDispose], 'function');
  await lock[Symbol.asyncDispose]();
  assert.equal(record(store, 'k').state, 'free');
});

test('tokens are 128 random bits, never repeated', async () => {
  const store = new MemoryStore();
  const tokens = new Set();
  for (let i = 0; i < 500; i++) {
    const lock = await acquireLock(store, 'k');
    tokens.add(lock.token);
    await lock.release();
  }
  assert.equal(tokens.size, 500);
});

test('16 local contenders queue FIFO and cost at most 1.5 store calls per acquisition', async () => {
  const store = new MapStore();
  const order = [];
  await Promise.all(
    Array.from({ length: 16 }, async (_, i) => {
      const lock = await acquireLock(store, 'board', { waitMs: 10000 });
      order.push([i, lock.fence]);
      await sleep(1);
      await lock.release();
    }),
  );
  assert.deepEqual(order.map(([i]) => i), [...Array(16).keys()]);
  assert.ok(order.every(([, fence], i) => i === 0 || fence > order[i - 1][1]));
  assert.ok(store.calls / 16 <= 1.5, `${store.calls / 16} calls per acquisition`);
});

// On mocked time: a lease of 150 ms and waits of 400 ms against holds of a few milliseconds,
// whatever the machine's load.
test('randomized contention: 16 contenders in 4 isolates over a laggy store failing 10% of calls', () => onMockedTime(async (clock) => {
  let seed = 4242;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const records = new Map();
  const isolates = Array.from({ length: 4 }, () => new MapStore({ records, lagMs: 3, failRate: 0.1, random }));
  let counter = 0;
  let holders = 0;
  let overlaps = 0;
  const fences = [];
  let errors = 0;
  await clock.settle(Promise.all(
    Array.from({ length: 16 }, async (_, contender) => {
      const store = isolates[contender % 4];
      for (let round = 0; round < 25; round++) {
        let lock;
        try {
          lock = await acquireLock(store, 'counter', { waitMs: 400, staleMs: 150 });
        } catch (error) {
          assert.ok(error instanceof LockStoreError, String(error));
          errors += 1;
          continue;
        }
        if (!lock) continue;
        holders += 1;
        if (holders > 1) overlaps += 1;
        fences.push(lock.fence);
        const seen = counter;
        await clock.sleep(Math.floor(random() * 3)); // an await inside the hold
        counter = seen + 1;
        holders -= 1;
        await lock.release().catch((error) => {
          assert.ok(error instanceof LockStoreError);
          errors += 1;
        });
      }
    }),
  ));
  assert.equal(overlaps, 0, 'no two holders at once');
  assert.equal(counter, fences.length, 'no lost update');
  assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), 'fences rise in hold order');
  // Every injected failure reached the core; each failed operation surfaced one error (a write
  // read back after its failure may fail again, which is still one operation's failure).
  const injected = isolates.reduce((n, store) => n + store.failures, 0);
  const seen = isolates.reduce((n, store) => n + lockStats(store).storeFailures, 0);
  assert.equal(seen, injected, 'every failure reached the core');
  assert.ok(errors > 0 && errors <= injected, `${errors} errors for ${injected} failures`);
  assert.ok(fences.length > 100, `${fences.length} holds`);
  assert.deepEqual(unhandled, []);
}));
