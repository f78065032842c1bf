// Randomized: 12 000 works over 60 keys with random delays, failures, synchronous throws,
// works that never settle and timeouts, on real timers. Per key, works must start in the order
// they entered and never overlap — except that a work that timed out is abandoned, so the next
// one may start while it still runs.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { createKeyedSerializer, SerializedWorkTimeout } from 'keyturn';

// KEYTURN_CONTEXTUAL=1 runs the same tests in the mode the workerd entry turns on (each work
// started from its own caller's promise reaction, a deadline timer per work).
if (process.env.KEYTURN_CONTEXTUAL === '1') (await import('../../pkg/serializer.js')).startWorksInTheirCallersContext();

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

test('random works keep per-key entry order and never overlap except after a timeout', async () => {
  let seed = 20261129;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const TIMEOUT = 8;
  const serialize = createKeyedSerializer({ timeoutMs: TIMEOUT });
  const KEYS = 60;
  const WORKS = 12000;
  const entered = Array.from({ length: KEYS }, () => []);
  const started = Array.from({ length: KEYS }, () => []);
  // seq → { ended, signal }: `ended` once the work's own promise settled (or it returned or
  // threw); a work that timed out has its signal aborted before the next one may start.
  const state = new Map();
  const lastStarted = new Array(KEYS).fill(-1);
  const overlaps = [];
  const outcomes = { fulfilled: 0, rejected: 0, timedOut: 0, late: 0 };
  const lateExpected = new Set();
  const lateReported = new Set();
  const all = [];

  for (let seq = 0; seq < WORKS; seq++) {
    const key = Math.floor(random() * KEYS);
    entered[key].push(seq);
    const roll = random();
    const delay = Math.floor(random() * 12); // 0..11 ms: some beyond the 8 ms deadline
    const kind = roll < 0.1 ? 'throw' : roll < 0.2 ? 'reject' : roll < 0.22 ? 'never' : roll < 0.3 ? 'sync' : 'resolve';
    const work = (signal) => {
      assert.ok(signal instanceof AbortSignal);
      const previous = state.get(lastStarted[key]);
      if (previous !== undefined && !previous.ended && !previous.signal.aborted) {
        overlaps.push(`key ${key}: work ${seq} started while work ${lastStarted[key]} ran`);
      }
      lastStarted[key] = seq;
      started[key].push(seq);
      const mine = { ended: false, signal };
      state.set(seq, mine);
      if (kind === 'throw') {
        mine.ended = true;
        throw new Error(`throw ${seq}`);
      }
      if (kind === 'sync') {
        mine.ended = true;
        return seq;
      }
      if (kind === 'never') return new Promise(() => {});
      return sleep(delay).then(() => {
        mine.ended = true;
        if (kind === 'reject') throw new Error(`reject ${seq}`);
        return seq;
      });
    };
    // The work's own end marks it settled; a timeout marks it abandoned. Either frees the key.
    const onLateSettle = (value) => lateReported.add(seq) && value;
    const result = serialize(`key-${key}`, work, { onLateSettle }).then(
      (value) => {
        assert.equal(value, seq);
        outcomes.fulfilled += 1;
      },
      (error) => {
        if (error instanceof SerializedWorkTimeout) {
          assert.equal(error.key, `key-${key}`);
          assert.equal(state.get(seq).signal.aborted, true);
          outcomes.timedOut += 1;
          if (kind === 'resolve' || kind === 'reject') lateExpected.add(seq);
        } else {
          assert.match(error.message, new RegExp(`^(throw|reject) ${seq}$`));
          outcomes.rejected += 1;
        }
      },
    );
    all.push(result);
    // Enter works in bursts, with time passing between some of them.
    if (random() < 0.01) await sleep(1);
  }
  await Promise.all(all);
  await sleep(30); // late settlements of abandoned works
  assert.deepEqual(overlaps, [], 'no work started while the previous one of its key ran');
  assert.deepEqual(started, entered, 'per key, works start in the order they entered');
  assert.equal(serialize.pending(), 0);
  assert.ok(outcomes.timedOut > 200, `exercises timeouts (${JSON.stringify(outcomes)})`);
  assert.ok(outcomes.rejected > 1000 && outcomes.fulfilled > 5000, JSON.stringify(outcomes));
  // onLateSettle reports exactly the abandoned works that settled after all.
  assert.deepEqual([...lateReported].sort((a, b) => a - b), [...lateExpected].sort((a, b) => a - b));
  assert.deepEqual(unhandled, []);
});
