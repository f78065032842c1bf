// Leases: heldUntil, renew, lock.signal, acquireLock's signal and withLock, against pkg/.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { acquireLock, withLock, LockUnavailable, LockStoreError, LOCK_WAIT_MS } from 'keyturn';
import { MapStore, record } from './map-store.mjs';
import { MODES } from './modes.mjs';
import { onMockedTime } from './support.mjs';

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));
const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));
after(() => assert.deepEqual(unhandled, []));

const clock = () => {
  let t = 1_000_000;
  const now = () => t;
  now.advance = (ms) => {
    t += ms;
  };
  return now;
};

test('heldUntil is the record time plus staleMs; renew is one CAS that moves it, keeping token and fence', async () => {
  const store = new MapStore();
  const now = clock();
  const lock = await acquireLock(store, 'k', { staleMs: 1000, now });
  assert.equal(lock.heldUntil, 1_001_000);
  assert.equal(record(store, 'k').at, 1_000_000);
  now.advance(600);
  const calls = store.calls;
  assert.equal(await lock.renew(), true);
  assert.equal(store.calls, calls + 1, 'one store call');
  assert.equal(lock.heldUntil, 1_001_600);
  const renewed = record(store, 'k');
  assert.deepEqual([renewed.token, renewed.fence, renewed.at, renewed.state], [lock.token, lock.fence, 1_000_600, 'held']);
  // Two renewals at once share one CAS.
  const both = await Promise.all([lock.renew(), lock.renew()]);
  assert.deepEqual(both, [true, true]);
  assert.equal(store.calls, calls + 2);
  await lock.release();
  assert.equal(record(store, 'k').state, 'free');
  assert.equal(await lock.renew(), false, 'after release');
  assert.equal(store.calls, calls + 3, 'no call for a released lease');
});

test('a lease past its heldUntil is lost for good: renew answers false with no store call, and a waiter takes it over', async () => {
  const store = new MapStore();
  const now = clock();
  const lock = await acquireLock(store, 'k', { staleMs: 500, now });
  now.advance(500);
  const calls = store.calls;
  assert.equal(await lock.renew(), false);
  assert.equal(store.calls, calls);
  assert.equal(lock.signal.aborted, true);
  now.advance(1);
  const next = await acquireLock(store, 'k', { staleMs: 500, now, waitMs: 0 });
  assert.ok(next && next.fence > lock.fence, 'taken over');
  await lock.release();
  assert.equal(record(store, 'k').token, next.token, 'the late release changed nothing');
});

test('renew answers false and the signal aborts once the record was taken over', async () => {
  const records = new Map();
  const now = clock();
  const lock = await acquireLock(new MapStore({ records }), 'k', { staleMs: 500, now });
  const { signal } = lock;
  assert.equal(signal.aborted, false);
  now.advance(501);
  const taker = await acquireLock(new MapStore({ records }), 'k', { staleMs: 500, now, waitMs: 0 });
  assert.ok(taker);
  assert.equal(await lock.renew(), false);
  assert.equal(signal.aborted, true);
  assert.equal(signal.reason.name, 'AbortError');
  await taker.release();
});

test('lock.signal aborts at release and when heldUntil passes unrenewed; unread, it arms no timer', async () => {
  const store = new MapStore();
  const released = await acquireLock(store, 'a');
  const { signal } = released;
  await released.release();
  assert.equal(signal.aborted, true);
  assert.match(signal.reason.message, /released/);

  // On mocked time: a lease's end is its timer's, to the millisecond. (A store of its own: its
  // lock manager's timers are all mocked ones.)
  await onMockedTime(async (clock) => {
    const store = new MapStore();
    const lapsing = await acquireLock(store, 'b', { staleMs: 40 });
    const lapse = lapsing.signal;
    await clock.advance(20);
    assert.equal(lapse.aborted, false);
    await clock.advance(60);
    assert.equal(lapse.aborted, true);
    assert.match(lapse.reason.message, /heldUntil/);

    // Renewed in time, it does not abort.
    const renewed = await acquireLock(store, 'c', { staleMs: 60 });
    const kept = renewed.signal;
    for (let i = 0; i < 4; i++) {
      await clock.advance(25);
      assert.equal(await clock.settle(renewed.renew()), true);
    }
    assert.equal(kept.aborted, false);
    await clock.settle(renewed.release());
  });

  // Not read: an acquisition and release arm no timer at all.
  const real = globalThis.setTimeout;
  let armed = 0;
  globalThis.setTimeout = (...args) => {
    armed += 1;
    return real(...args);
  };
  try {
    const quiet = await acquireLock(store, 'd');
    await quiet.renew();
    await quiet.release();
  } finally {
    globalThis.setTimeout = real;
  }
  assert.equal(armed, 0);
});

test('a lock handed on within a batch has a true heldUntil, and renewing it works', async () => {
  const store = new MapStore();
  const now = clock();
  const first = await acquireLock(store, 'k', { staleMs: 2000, now });
  const second = acquireLock(store, 'k', { staleMs: 2000, now, waitMs: 10_000 });
  const third = acquireLock(store, 'k', { staleMs: 2000, now, waitMs: 10_000 });
  const fourth = acquireLock(store, 'k', { staleMs: 2000, now, waitMs: 10_000 });
  now.advance(10);
  await first.release();
  const b = await second;
  assert.equal(b.heldUntil, record(store, 'k').at + 2000);
  now.advance(10);
  const calls = store.calls;
  await b.release();
  const c = await third;
  assert.equal(store.calls, calls, 'handed on from the batch');
  assert.equal(c.heldUntil, 1_000_010 + 2000, 'the batch record was written at +10');
  now.advance(10);
  assert.equal(await c.renew(), true);
  assert.equal(c.heldUntil, 1_000_030 + 2000);
  assert.equal(record(store, 'k').at, 1_000_030);
  await c.release();
  const d = await fourth;
  assert.equal(d.fence, c.fence + 1);
  assert.equal(await d.renew(), true);
  await d.release();
  assert.equal(record(store, 'k').state, 'free');
});

test("acquireLock's signal: already aborted calls no store; aborted while waiting leaves the line at once", async () => {
  const store = new MapStore();
  const reason = new Error('client went away');
  await assert.rejects(acquireLock(store, 'k', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  assert.equal(store.calls, 0);

  // A still clock, so that fences rise by one.
  const now = () => 1_000_000;
  const holder = await acquireLock(store, 'k', { now });
  const controller = new AbortController();
  const waiting = acquireLock(store, 'k', { waitMs: 10_000, signal: controller.signal, now });
  const behind = acquireLock(store, 'k', { waitMs: 10_000, now });
  await sleep(5);
  controller.abort(reason);
  await assert.rejects(waiting, (e) => e === reason);
  await holder.release();
  const next = await behind;
  assert.equal(next.fence, holder.fence + 1, 'the aborted waiter was skipped, nothing held by it');
  await next.release();
  await assert.rejects(acquireLock(store, 'k', { signal: 'no' }), TypeError);
});

test("acquireLock's signal aborted while its create is in flight: it rejects at once, and the create that won is released", () =>
  // On mocked time: "at once" and "not after the create answered" are exact.
  onMockedTime(async (clock) => {
    const store = new MapStore({ lagMs: 30, random: () => 0.99 });
    const controller = new AbortController();
    const pending = acquireLock(store, 'k', { signal: controller.signal });
    await clock.advance(5);
    const aborted = clock.now();
    controller.abort();
    await assert.rejects(clock.settle(pending), (e) => e.name === 'AbortError');
    assert.ok(clock.now() - aborted < 10, 'not after the create answered');
    assert.equal(store.records.has('k'), false, 'the create is still in flight');
    await clock.advance(100);
    assert.equal(record(store, 'k').state, 'free', 'nothing left held once it answered');
    // The head polling (between reads) leaves at once too.
    const holder = await clock.settle(acquireLock(new MapStore({ records: store.records }), 'k'));
    const poller = new AbortController();
    const polling = acquireLock(store, 'k', { waitMs: 10_000, signal: poller.signal });
    await clock.advance(80);
    const started = Date.now();
    poller.abort();
    await assert.rejects(clock.settle(polling));
    assert.ok(Date.now() - started < 40, 'not after the poll');
    await clock.settle(holder.release());
  }));

test('withLock: runs fn with the lock, releases after, and answers what fn did', async () => {
  const store = new MapStore();
  const value = await withLock(store, 'k', async (lock) => {
    assert.equal(record(store, 'k').token, lock.token);
    return 42;
  });
  assert.equal(value, 42);
  assert.equal(record(store, 'k').state, 'free');
  const boom = new Error('boom');
  await assert.rejects(withLock(store, 'k', () => { throw boom; }), (e) => e === boom);
  assert.equal(record(store, 'k').state, 'free');
  await assert.rejects(withLock(store, 'k', 'not a function'), TypeError);
});

test('withLock renews every staleMs / 3 while fn runs, so a long fn keeps its lease', () =>
  // On mocked time: renewals every 30 ms keep a 90 ms lease whatever the machine's load.
  onMockedTime(async (clock) => {
    const store = new MapStore();
    let lost;
    let renewals = 0;
    const original = store.replace.bind(store);
    store.replace = (key, version, value) => {
      if (JSON.parse(value).state === 'held') renewals += 1;
      return original(key, version, value);
    };
    await clock.settle(withLock(store, 'k', async (lock) => {
      lost = lock.signal;
      await clock.sleep(250);
    }, { staleMs: 90 }));
    assert.ok(renewals >= 4, `${renewals} renewals`);
    assert.match(lost.reason.message, /released/, 'aborted only at the release');
  }));

test('withLock rejects with LockUnavailable when a live holder kept the name for waitMs', async () => {
  const store = new MapStore();
  const holder = await acquireLock(store, 'k');
  const error = await withLock(store, 'k', () => 1, { waitMs: 30 }).catch((e) => e);
  assert.ok(error instanceof LockUnavailable);
  assert.deepEqual([error.name, error.key, error.waitMs], ['LockUnavailable', 'k', 30]);
  await holder.release();
  const failing = new MapStore({ failRate: 1 });
  await assert.rejects(withLock(failing, 'k', () => 1), LockStoreError);
  const defaulted = await withLock(store, 'k', async () => {
    const again = await withLock(new MapStore({ records: store.records }), 'k', () => 1).catch((e) => e);
    return again;
  });
  assert.equal(defaulted.waitMs, LOCK_WAIT_MS);
});

// A signal first read after a renewal found the record taken over is aborted as it is read, in
// both entries' modes (on Workers the answer to reading it is the reader's own, not posted).
for (const mode of MODES) {
  test(`${mode.name}: a signal first read after the lease was taken over is aborted at once`, async () => {
    const inner = new mode.MemoryStore();
    const aborted = await mode.withLock(inner, 'taken', async (lock) => {
      const current = await inner.read('taken');
      await inner.replace('taken', current.version, current.value.replace(/"token":"[^"]*"/, '"token":"someone-else"'));
      await lock.renew();
      return lock.signal.aborted;
    }, { staleMs: 60_000 });
    assert.equal(aborted, true);
  });
}
