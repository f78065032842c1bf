// Durations past what host timers honour. Node (as browsers) fires a timer whose delay is past
// 2^31 − 1 ms after 1 ms, with a TimeoutOverflowWarning: a lease, a wait or a deadline that long,
// handed to setTimeout as it is, wakes its owner at once, again and again — a contender for a held
// name then makes hundreds of store calls in 300 ms instead of waiting.
//
// The contract, per duration option — staleMs, waitMs, storeTimeoutMs and maxClockSkewMs of
// acquireLock and withLock; timeoutMs, staleMs, storeTimeoutMs and maxClockSkewMs of a
// serializer over a store; a call's timeoutMs; a serializer's timeoutMs without a store: past
// 2147483647 it is either refused with a RangeError naming the option and the limit, or accepted
// and harmless: a contender makes at most 10 store calls in 300 ms, and no timer overflows.
// Either passes here. At exactly 2147483647 it must be accepted, and harmless.
//
// One case at a time: a TimeoutOverflowWarning is the process's, and is laid at the door of the
// case that was running.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { acquireLock, createKeyedSerializer, MemoryStore, withLock } from 'keyturn';

import { deferred } from './support.mjs';

const LIMIT = 2147483647; // 2^31 − 1: the longest delay setTimeout honours
const PAST = 3e9;
const WINDOW_MS = 300;
const MOST_CALLS = 10;
// Every wait here that should end at once, bounded so that one that does not fails its case.
const SETTLE_MS = 5000;
// Uncontended turns after the contention, each arming its own timers: an overflow that depends
// on the clock's fraction at the moment (a deadline computed as now + duration, armed as its
// difference with now, rounded up) shows in some of them, not in every one.
const BURST = 50;
const HOUR = 3_600_000;

const overflows = [];
process.on('warning', (warning) => {
  if (warning.name === 'TimeoutOverflowWarning') overflows.push(warning.message.split('\n')[0]);
});
const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

/**
 * One isolate's store object over a MemoryStore shared by both, counting its calls: each store
 * object is a lock manager of its own, as each isolate's is. With MemoryStore's `changed`, as a
 * Durable Object or Redis with `subscribe` have: a contender watches the record until the lease
 * would end instead of polling it (a polling store is read every 25 ms by design, about 20
 * reads in 300 ms, which is not what this bounds).
 */
function counted(inner) {
  const store = {
    calls: 0,
    create: (key, value) => (store.calls++, inner.create(key, value)),
    read: (key) => (store.calls++, inner.read(key)),
    replace: (key, version, value) => (store.calls++, inner.replace(key, version, value)),
    changed: (key, version, ms) => (store.calls++, inner.changed(key, version, ms)),
  };
  return store;
}

/** `promise`, or a failure naming `what` once SETTLE_MS passed. */
async function within(promise, what) {
  const controller = new AbortController();
  const limit = sleep(SETTLE_MS, undefined, { signal: controller.signal }).then(() => assert.fail(`${what}: still pending after ${SETTLE_MS} ms`));
  limit.catch(() => {});
  try {
    return await Promise.race([promise, limit]);
  } finally {
    controller.abort();
  }
}

/**
 * How a holder ended (`ended`, or its error's name), and whether its signal aborted before it
 * was let go (`letGo` ends it; a release aborts the signal as it starts).
 */
const ended = (signal, letGo) => {
  const aborted = signal.aborted;
  return letGo().then(
    () => ({ holder: 'ended', aborted }),
    (error) => ({ holder: error.name, aborted }),
  );
};

/**
 * How each entry point holds a name (or a key) while a contender waits for it: made from the two
 * isolates' store objects `a` and `b` (a serializer's entry also from its options: a refusal is
 * thrown there), `hold(options)` answers once `a` holds the name, with its release — which
 * answers how the holder ended and whether its signal aborted meanwhile; `contend(options,
 * signal)` waits for the same name from `b`; `cycle(options)` is one uncontended turn in `a`.
 * `options` carries the options under test beside the other durations at their longest legal
 * values, so that none of those ends the wait before an option under test would.
 */
const LOCK = {
  others: { staleMs: LIMIT, waitMs: LIMIT },
  entries: {
    acquireLock: (a, b) => ({
      async hold(options) {
        const lock = await acquireLock(a, 'held', options);
        assert.ok(lock, 'the holder has the name');
        const { signal } = lock; // armed: the lease's own end
        return () => ended(signal, () => lock.release());
      },
      async contend(options, signal) {
        const lock = await acquireLock(b, 'held', { ...options, signal });
        if (lock === undefined) throw new Error('gave up waiting');
        await lock.release();
      },
      async cycle(options) {
        const lock = await acquireLock(a, 'burst', options);
        void lock.signal;
        await lock.release();
      },
    }),
    withLock: (a, b) => ({
      async hold(options) {
        const started = deferred();
        const done = deferred();
        const held = withLock(a, 'held', (lock) => (started.resolve(lock.signal), done.promise), options);
        const signal = await Promise.race([started.promise, held]);
        return () => ended(signal, () => (done.resolve(), held));
      },
      contend: (options, signal) => withLock(b, 'held', async () => {}, { ...options, signal }),
      cycle: (options) => withLock(a, 'burst', async (lock) => lock.fence, options),
    }),
  },
  options: ['staleMs', 'waitMs', 'storeTimeoutMs', 'maxClockSkewMs'],
};

/** A serializer per isolate; `callOptions` are every call's, `options` the serializers'. */
function serializers(a, b, options, callOptions = {}) {
  const first = createKeyedSerializer({ ...(a && { store: a }), ...options });
  const second = b ? createKeyedSerializer({ store: b, ...options }) : first;
  return {
    async hold() {
      const started = deferred();
      const done = deferred();
      const held = first('held', (signal) => (started.resolve(signal), done.promise), callOptions);
      const signal = await Promise.race([started.promise, held]);
      return () => ended(signal, () => (done.resolve(), held));
    },
    contend: (_options, signal) => second('held', async () => 'contender', { ...callOptions, signal }),
    async cycle() {
      assert.equal(await first('burst', async () => 'ran', callOptions), 'ran', 'a turn ran to its end');
    },
  };
}

// Every entry point and option: `names`, the options under test, all at one value;
// `withValue(value)`, the options of the call under test with them at `value`;
// `make(a, b, options)`, the entry (it throws or rejects a refusal).
const atValue = (names, value) => Object.fromEntries(names.map((name) => [name, value]));
const CASES = [
  ...Object.keys(LOCK.entries).flatMap((entry) =>
    // Each option alone, and the two the issue reports together: a lease and a wait that long.
    [...LOCK.options.map((option) => [option]), ['staleMs', 'waitMs']].map((names) => ({
      entry,
      names,
      withValue: (value) => ({ ...LOCK.others, ...atValue(names, value) }),
      make: (a, b) => LOCK.entries[entry](a, b),
    })),
  ),
  ...['timeoutMs', 'staleMs', 'storeTimeoutMs', 'maxClockSkewMs'].map((option) => ({
    entry: 'createKeyedSerializer over a store',
    names: [option],
    // A deadline of an hour, so that a contender's wait for the lease is long: the deadline
    // covers it.
    withValue: (value) => ({ timeoutMs: HOUR, [option]: value }),
    make: (a, b, options) => serializers(a, b, options),
  })),
  {
    entry: "a serializer's call over a store",
    names: ['timeoutMs'],
    withValue: (value) => ({ timeoutMs: value }),
    make: (a, b, options) => serializers(a, b, { timeoutMs: HOUR }, options),
  },
  {
    entry: 'createKeyedSerializer without a store',
    names: ['timeoutMs'],
    withValue: (value) => ({ timeoutMs: value }),
    // Its contender waits in this isolate: no store call at all.
    make: (_a, _b, options) => serializers(undefined, undefined, options),
  },
];

/**
 * Runs one case: its options at `value`. Answers `{ refused }` when the entry point refused it,
 * else what a contender did while the name was held for WINDOW_MS, and the overflows meanwhile
 * and over BURST uncontended turns after.
 */
async function run({ make, withValue }, value) {
  const options = withValue(value);
  const inner = new MemoryStore();
  const a = counted(inner);
  const b = counted(inner);
  const from = overflows.length;
  const unhandledFrom = unhandled.length;
  let entry;
  let release;
  try {
    entry = make(a, b, options);
    release = await within(entry.hold(options), 'the holder');
  } catch (error) {
    return { refused: error };
  }
  const controller = new AbortController();
  const before = b.calls;
  const contender = entry.contend(options, controller.signal).then(
    () => 'it took the name',
    (error) => (error.name === 'Error' ? error.message : error.name),
  );
  await sleep(WINDOW_MS);
  const calls = b.calls - before;
  controller.abort();
  const outcome = await within(contender, 'the contender, aborted');
  const { holder, aborted } = await within(release(), 'the holder, released');
  for (let i = 0; i < BURST; i++) await within(entry.cycle(options), `uncontended turn ${i}`);
  await sleep(20); // warnings and unhandled rejections are told on a later tick
  return { calls, outcome, holder, aborted, overflows: overflows.slice(from), unhandled: unhandled.slice(unhandledFrom) };
}

/** The checks on an accepted option. */
function assertHarmless(result, what) {
  const seen = `${what}: the contender made ${result.calls} store calls in ${WINDOW_MS} ms and ended with ${result.outcome}; ${result.overflows.length} timers overflowed${result.overflows.length ? ` ("${result.overflows[0]}")` : ''}`;
  assert.ok(result.calls <= MOST_CALLS, `${seen} — at most ${MOST_CALLS} store calls`);
  assert.equal(result.overflows.length, 0, `${seen} — no timer may overflow`);
  assert.equal(result.outcome, 'AbortError', `${seen} — it must wait until its signal aborts`);
  assert.deepEqual([result.holder, result.aborted], ['ended', false], `${what}: the holder kept its lease (its signal unaborted) and ended as its code did`);
  assert.deepEqual(result.unhandled, [], `${what}: no unhandled rejection`);
}

for (const kase of CASES) {
  const { entry, names } = kase;
  const options = names.map((name) => `options.${name}`).join(' and ');
  test(`${entry}: ${options} past ${LIMIT} — refused with a RangeError naming the option and the limit, or harmless`, async () => {
    const what = `${options} = ${PAST}`;
    const result = await run(kase, PAST);
    if (result.refused !== undefined) {
      const { refused } = result;
      assert.ok(refused instanceof RangeError, `${what}: refused with ${refused?.name}: ${refused?.message}`);
      assert.match(refused.message, new RegExp(`\\boptions\\.(${names.join('|')})\\b`), `${what}: the message names the option`);
      assert.match(refused.message, new RegExp(`\\b${LIMIT}\\b`), `${what}: the message names the limit`);
    } else {
      assertHarmless(result, `${what}, accepted`);
    }
  });

  test(`${entry}: ${options} at exactly ${LIMIT} — accepted, and harmless`, async () => {
    const what = `${options} = ${LIMIT}`;
    const result = await run(kase, LIMIT);
    assert.equal(result.refused, undefined, `${what}: refused: ${result.refused?.message}`);
    assertHarmless(result, what);
  });
}
