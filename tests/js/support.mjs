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
