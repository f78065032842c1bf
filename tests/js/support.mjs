// Helpers the JS tests share (not a test file itself: node's runner picks `*.test.mjs`).
import { after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/** A promise and its resolvers (Node 20 has no Promise.withResolvers). */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A deterministic number generator in [0, 1) (an LCG): the same run every time. */
export function seededRandom(seed) {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/**
 * Keeps the event loop alive for the file's tests (the package's deadline timers are unref'd,
 * as `keyed-serializer.js`'s are, so awaiting a timeout alone would let Node exit), and collects unhandled
 * rejections: `noUnhandled()` lets pending rejection tracking run, then asserts there were none.
 */
export function watchProcess() {
  const keepAlive = setInterval(() => {}, 1000);
  after(() => clearInterval(keepAlive));
  const unhandled = [];
  process.on('unhandledRejection', (reason) => unhandled.push(reason));
  return {
    unhandled,
    async noUnhandled() {
      await sleep(5);
      assert.deepEqual(unhandled, [], 'no unhandled rejection');
    },
  };
}

/** Fences per millisecond of an acquirer's wall clock (`FENCES_PER_MS` in src/lock/core.rs). */
export const FENCES_PER_MS = 1000;

/** The least fence an acquisition at `ms` (epoch milliseconds) takes, by the clock rule. */
export const clockFence = (ms) => Math.floor(ms) * FENCES_PER_MS;

/**
 * Asserts that `fence` is what an acquisition that wrote the record between the epoch
 * milliseconds `from` and `to` takes over a record whose last fence is `last` (0: none): one
 * above it, or the clock's if that is higher.
 */
export function assertFence(fence, last, from, to, message = '') {
  const least = Math.max(last + 1, clockFence(from));
  const most = Math.max(last + 1, clockFence(to));
  assert.ok(Number.isSafeInteger(fence) && fence >= least && fence <= most, `${message} fence ${fence} in [${least}, ${most}]`);
}

/**
 * Waits until `done()` (or the promise it answers) is true, looking every 5 ms, for at most
 * `limitMs`: whether it came true. A test waits this way for what it awaits (a subscription
 * reaching a server, calls made), not for a guess of how long that takes on a busy machine.
 */
export async function until(done, limitMs = 2000) {
  const end = performance.now() + limitMs;
  for (;;) {
    if (await done()) return true;
    if (performance.now() > end) return false;
    await sleep(5);
  }
}

/** Lets every pending reaction run: one turn of the event loop (`setImmediate` is never mocked). */
export const flush = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs `body(clock)` on mocked time: `setTimeout`, `clearTimeout`, `Date.now` and
 * `performance.now` are one clock, in whole milliseconds from where `performance.now` was, that
 * moves only when `clock` moves it, 1 ms at a time. Its timers fire as Node's do — in order of
 * their time, then of their arming, a delay under 1 ms taken as 1 — each followed by every
 * reaction it led to before the next one fires. A busy machine delays real timers by tens of
 * milliseconds; an assertion about time made here has no margin for it to eat, so a rule that
 * depends on a few milliseconds is tested on this clock, not on real timers. The test's own
 * timers must be `clock.sleep` (node:timers/promises' are not these), and what it awaits that
 * takes time is awaited through `clock.settle`, so that a broken implementation fails the test
 * instead of hanging it. Make the stores and serializers it uses inside it: a lock manager
 * that armed timers on one clock keeps them past the switch to the other.
 *
 * `clock.now()` is the mocked `performance.now()`; `clock.advance(ms)` moves the clock `ms`;
 * `clock.pass(ms)` moves it at once, as a synchronous part that takes `ms` would;
 * `clock.settle(promise)` moves it until `promise` settles, then answers it — or rejects once
 * `limitMs` (a minute) passed with it still pending.
 */
export async function onMockedTime(body) {
  const real = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    dateNow: Date.now,
    performanceNow: performance.now,
  };
  let now = Math.ceil(real.performanceNow.call(performance));
  let armed = 0;
  /** @type {Map<number, { at: number, fn: Function, args: unknown[] }>} by arming order */
  const timers = new Map();
  class Timeout {
    constructor(id) {
      this.id = id;
    }
    ref() {
      return this;
    }
    unref() {
      return this;
    }
    hasRef() {
      return true;
    }
    [Symbol.toPrimitive]() {
      return this.id;
    }
  }
  globalThis.setTimeout = (fn, ms, ...args) => {
    if (typeof fn !== 'function') throw new TypeError('setTimeout: the callback must be a function');
    const delay = Number(ms) >= 1 && Number(ms) <= 2 ** 31 - 1 ? Number(ms) : 1;
    timers.set(++armed, { at: now + delay, fn, args });
    return new Timeout(armed);
  };
  globalThis.clearTimeout = (timer) => {
    if (timer !== undefined && timer !== null) timers.delete(Number(timer));
  };
  Date.now = () => now;
  performance.now = () => now;
  /** The next timer due, if any: the earliest, then the first armed. */
  const due = () => {
    let found;
    for (const [id, timer] of timers) if (timer.at <= now && (found === undefined || timer.at < found[1].at)) found = [id, timer];
    return found;
  };
  /** One millisecond: its timers fire one at a time, each followed by its reactions. */
  const tick = async () => {
    now += 1;
    for (let next = due(); next !== undefined; next = due()) {
      timers.delete(next[0]);
      next[1].fn(...next[1].args);
      await flush();
    }
  };
  const clock = {
    now: () => now,
    /** Time spent in synchronous code: the clock moves `ms` at once, and no timer fires meanwhile. */
    pass(ms) {
      now += ms;
    },
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    async advance(ms) {
      await flush();
      for (let i = 0; i < ms; i++) {
        await tick();
        await flush();
      }
    },
    async settle(promise, limitMs = 60_000) {
      let settled = false;
      promise.then(
        () => (settled = true),
        () => (settled = true),
      );
      await flush();
      for (let t = 0; !settled; t++) {
        if (t >= limitMs) throw new Error(`still pending after ${limitMs} ms of mocked time`);
        await tick();
        await flush();
      }
      return promise;
    },
  };
  try {
    return await body(clock);
  } finally {
    globalThis.setTimeout = real.setTimeout;
    globalThis.clearTimeout = real.clearTimeout;
    Date.now = real.dateNow;
    performance.now = real.performanceNow;
  }
}
