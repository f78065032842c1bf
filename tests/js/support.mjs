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
