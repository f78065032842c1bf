// Two package instances over one store, as two isolates would be: the ESM entry and the
// CommonJS one, each with its own wasm instance and lock core. A store with `changed` wakes the
// head of a name's line when a holder in the other instance lets go; one without is polled.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import * as a from 'keyturn';

import { busyKey, localHolder, quantile } from './busy-key.mjs';
import { countingStore } from './counting-store.mjs';
import { onMockedTime } from './support.mjs';
import { checkPaced, epochMs, pacedWorks } from './paced-works.mjs';

const b = createRequire(import.meta.url)('keyturn');


// What is timed here to a few milliseconds — a wait against a poll's pause, the polls made while
// a name is held — is timed on mocked time (support.mjs): the package's timers and clocks move
// only as the test moves them, so a busy machine's late timers change nothing.

/**
 * On `clock`, A holds `name` for `holdMs` while B asks for it: B's wait after A let go, and the
 * calls of both cycles.
 */
async function handOff(clock, store, name, holdMs) {
  const held = await clock.settle(a.acquireLock(store, name));
  const before = store.calls - 1;
  const asked = b.acquireLock(store, name, { waitMs: 1000 });
  await clock.advance(holdMs);
  const released = clock.now();
  await clock.settle(held.release());
  const lock = await clock.settle(asked);
  const waitedMs = clock.now() - released;
  assert.ok(lock !== undefined, 'B got the name');
  assert.ok(lock.fence > held.fence, 'its fence is above A\'s');
  await clock.settle(lock.release());
  return { waitedMs, calls: store.calls - before };
}

test('MemoryStore.changed: true at once for another version, at the next write for this one, false after ms', async () => {
  const store = new a.MemoryStore();
  assert.equal(await store.changed('k', null, 10), false); // still absent after 10 ms
  const version = await store.create('k', 'v');
  assert.equal(await store.changed('k', null, 10), true);
  assert.equal(await store.changed('k', 'other', 10), true);
  const pending = store.changed('k', version, 5000);
  const started = performance.now();
  await store.replace('k', version, 'w');
  assert.equal(await pending, true);
  assert.ok(performance.now() - started < 1000, 'told at the write, not at ms');
  await assert.rejects(store.changed('k', version, -1), TypeError);
  await assert.rejects(store.changed(1, version, 1), TypeError);
});

test('across instances, a store with changed hands a name on at the release, with no polls', () => onMockedTime(async (clock) => {
  const store = countingStore(true);
  for (let i = 0; i < 10; i++) {
    const { waitedMs, calls } = await handOff(clock, store, `k${i}`, 30);
    // A: create; B: create (refused), read, its ask, watch; A's release: CAS (refused: the
    // ask moved the version), read, the free offered to B; B: read, CAS, release.
    assert.equal(calls, 11, `cycle ${i}: ${calls} calls`);
    assert.ok(waitedMs < 25, `cycle ${i}: B waited ${waitedMs} ms after the release, a poll's pause or more`);
  }
  assert.equal(store.watches, 10);
  // Every watch of B's was ended by A's release (a wake-up), each in place of a poll or more.
  const stats = b.lockStats(store);
  assert.equal(stats.watches, 10);
  assert.equal(stats.wakeUps, 10);
  assert.ok(stats.pollsSaved >= 10 * 3, `${stats.pollsSaved} polls saved`);
}));

test('across instances, a store without changed is polled as before, and still hands the name on', () => onMockedTime(async (clock) => {
  const store = countingStore(false);
  const { calls } = await handOff(clock, store, 'k', 30);
  assert.ok(calls > 11, `${calls} calls: polls`);
  assert.equal(store.watches, 0);
}));

test('a watch that fails is not reported: the head polls from then on, and gets the name', () => onMockedTime(async (clock) => {
  const store = countingStore(true);
  store.changed = async () => {
    store.calls++;
    store.watches++;
    throw new Error('no watching today');
  };
  const { calls } = await handOff(clock, store, 'k', 30);
  assert.equal(store.watches, 1, 'asked once, then polled');
  assert.ok(calls > 8);
}));

test('a watch that never answers ends when the record would turn stale, and the name is taken over', async () => {
  const store = countingStore(true);
  store.changed = () => (store.calls++, store.watches++, new Promise(() => {}));
  const dead = await a.acquireLock(store, 'k', { staleMs: 100 }); // never released: a dead holder
  const started = performance.now();
  const lock = await b.acquireLock(store, 'k', { waitMs: 2000, staleMs: 100 });
  const tookMs = performance.now() - started;
  assert.ok(lock !== undefined && lock.fence > dead.fence);
  assert.ok(tookMs >= 90 && tookMs < 1500, `took over after ${tookMs} ms`);
  assert.ok(store.watches <= 3, `${store.watches} watches`);
  await lock.release();
});

test('an abort ends a watch at once', () => onMockedTime(async (clock) => {
  const store = countingStore(true);
  const held = await clock.settle(a.acquireLock(store, 'k'));
  const controller = new AbortController();
  const asked = b.acquireLock(store, 'k', { waitMs: 5000, signal: controller.signal });
  await clock.advance(20);
  assert.equal(store.watches, 1);
  const started = clock.now();
  controller.abort(new Error('gone'));
  await assert.rejects(clock.settle(asked), /gone/);
  assert.ok(clock.now() - started < 50);
  await clock.settle(held.release());
}));

// The busy key of tests/js/busy-key.mjs: B is not overtaken without bound by a busy A. On
// mocked time, moved 1 ms at a time for as long as the run takes: B's waits are the package's,
// not the machine's (tests/js/cross-process.test.mjs and workerd-busy.test.mjs run it on real
// time, between processes and isolates).
for (const tells of [true, false]) {
  test(`a busy key: a remote caller waits about one batch of the holder's, not for it to idle (${tells ? 'wake-ups' : 'three methods'})`, () => onMockedTime(async (clock) => {
    const store = countingStore(tells);
    const serializeB = b.createKeyedSerializer({ store, timeoutMs: 10_000 });
    const callsOfB = () => b.lockStats(store).storeCalls;
    const { waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn } = await clock.settle(busyKey({ holder: localHolder(a, store), serializeB, callsOfB, ms: 2000 }));
    const [p50, max] = [quantile(waits, 0.5), quantile(waits, 1)];
    const report = `p50 ${p50.toFixed(1)} ms, max ${max.toFixed(1)} ms, B's calls ${callsOfBPerTurn.toFixed(1)} and both's ${callsPerTurnOfB.toFixed(1)} per turn of B, ${waits.length} turns of B, ${turnsOfA} of A`;
    assert.ok(waits.length >= 30, report);
    assert.ok(turnsOfA > 200, `A keeps its pace: ${report}`);
    // The bounds (bench/README.md has the figures on real time).
    assert.ok(p50 <= (tells ? 15 : 60), report);
    assert.ok(max <= (tells ? 100 : 250), report);
    // B's own calls per turn; both instances' (A's batches included) are in bench/README.md.
    assert.ok(callsOfBPerTurn <= (tells ? 16 : 40), report);
  }));
}

// The paces across instances run on mocked time too: a start is stamped when its work is called,
// which a busy machine would delay for one start and not for the next.
test('a pace across two package instances over one MemoryStore: 40 works of one key at 4 per 200 ms, no 5 starts within 200 ms, none overlapping', () => onMockedTime(async (clock) => {
  const store = new a.MemoryStore();
  const rate = { limit: 4, periodMs: 200 };
  const events = [];
  const began = epochMs();
  await clock.settle(Promise.all([a, b].map((k) => pacedWorks(k.createKeyedSerializer({ store, timeoutMs: 10_000, rate }), 'k', 20, (event) => events.push(event)))));
  assert.equal(events.length, 40);
  const starts = checkPaced(events, { ...rate, allowanceMs: 3 });
  assert.ok(starts[39] - began <= 2600, `the last started ${(starts[39] - began).toFixed(0)} ms after the first call`);
  const stats = [a, b].map((k) => k.lockStats(store));
  assert.ok(stats.every((s) => s.acquisitions > 0), `both instances took turns: ${JSON.stringify(stats)}`);
}));

test('ifAvailable over a store: refused with the time the record\'s pace gives, the work never called; at once on a free key', async () => {
  const store = new a.MemoryStore();
  const rate = { limit: 2, periodMs: 1000 };
  const serializeA = a.createKeyedSerializer({ store, rate });
  const serializeB = b.createKeyedSerializer({ store, rate });
  await Promise.all([1, 2].map(() => serializeA('k', () => {})));
  let called = false;
  const started = performance.now();
  const refused = await serializeB('k', () => { called = true; }, { ifAvailable: true }).catch((error) => error);
  const ms = performance.now() - started;
  assert.ok(refused instanceof b.SerializedWorkUnavailable, String(refused));
  assert.equal(refused.name, 'SerializedWorkUnavailable');
  assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= rate.periodMs, `retryAfterMs ${refused.retryAfterMs}`);
  assert.ok(ms < 200, `refused after ${ms.toFixed(0)} ms`);
  assert.equal(called, false);
  assert.equal(b.lockStats(store).held, 0, 'the lease it took went back');
  assert.equal(await serializeB('free', () => 'ran', { ifAvailable: true }), 'ran');
});

test('ifAvailable over a store: refused after one look while another instance holds the key, with no retryAfterMs; runs once the key is free', async () => {
  const store = new a.MemoryStore();
  const serializeA = a.createKeyedSerializer({ store });
  const serializeB = b.createKeyedSerializer({ store });
  let release;
  const holding = serializeA('k', () => new Promise((resolve) => { release = resolve; }));
  while (a.lockStats(store).held === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  let called = false;
  const started = performance.now();
  const refused = await serializeB('k', () => { called = true; }, { ifAvailable: true }).catch((error) => error);
  const ms = performance.now() - started;
  assert.ok(refused instanceof b.SerializedWorkUnavailable, String(refused));
  assert.equal(refused.retryAfterMs, undefined);
  assert.ok(ms < 200, `refused after ${ms.toFixed(0)} ms`);
  assert.equal(called, false);
  assert.equal(serializeB.stats().unavailable, 1);
  release();
  await holding;
  assert.equal(await serializeB('k', () => 'ran', { ifAvailable: true }), 'ran');
});

test('a pace across two package instances: a start is timed once its work\'s synchronous part ran, also in the record the other instance reads', () => onMockedTime(async (clock) => {
  const store = new a.MemoryStore();
  const rate = { limit: 1, periodMs: 100 };
  const starts = [];
  // A's work spends 30 ms in its synchronous part before it reads its start; B's reads at once.
  const first = a.createKeyedSerializer({ store, rate })('k', async () => {
    clock.pass(30);
    starts.push(Date.now());
  });
  const second = b.createKeyedSerializer({ store, rate })('k', async () => {
    starts.push(Date.now());
  });
  await clock.settle(Promise.all([first, second]));
  assert.equal(starts.length, 2);
  assert.ok(starts[1] - starts[0] >= rate.periodMs, `B started ${starts[1] - starts[0]} ms after A's work read its start`);
}));

test('a pace at concurrency 2 across two package instances over one MemoryStore: no 4 starts within 200 ms, never 3 at once', () => onMockedTime(async (clock) => {
  const store = new a.MemoryStore();
  const rate = { limit: 3, periodMs: 200 };
  const events = [];
  let live = 0;
  let most = 0;
  const began = epochMs();
  await clock.settle(Promise.all([a, b].map((k) => {
    const serialize = k.createKeyedSerializer({ store, timeoutMs: 10_000, rate, concurrency: 2 });
    return Promise.all(Array.from({ length: 12 }, () => serialize('k', async () => {
      const start = epochMs();
      most = Math.max(most, ++live);
      await new Promise((resolve) => setTimeout(resolve, 30));
      live -= 1;
      events.push({ start, end: epochMs() });
    })));
  })));
  const starts = events.map((event) => event.start).sort((x, y) => x - y);
  assert.equal(starts.length, 24);
  // A start is written before its work is called: up to one store round trip (MemoryStore: a
  // microtask or two) early, within the clocks' allowance.
  for (let i = 0; i + rate.limit < starts.length; i++) assert.ok(starts[i + rate.limit] - starts[i] >= rate.periodMs - 3, `${rate.limit + 1} starts within ${(starts[i + rate.limit] - starts[i]).toFixed(1)} ms`);
  assert.ok(most <= 2, `${most} at once`);
  assert.ok(starts[23] - began <= 1_400 + 600, `the last started ${(starts[23] - began).toFixed(0)} ms after the first call`);
}));
