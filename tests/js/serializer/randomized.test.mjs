// Randomized: 12 000 works over 60 keys with random delays, failures, synchronous throws,
// works that never settle and timeouts, on mocked time (../support.mjs): deadlines of 8 ms
// against delays of 0-11 ms, and aborts within 30 ms, play out as the seed says — how many time
// out, are refused or aborted is the package's doing, not a busy machine's late timers'. Per
// key, works must start in the order they entered and never overlap — except that a work that
// timed out is abandoned, so the next one may start while it still runs. In both modes (see
// ../modes.mjs).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { onMockedTime, seededRandom } from '../support.mjs';
import { forEachMode } from '../modes.mjs';

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

/**
 * What the works of each key did: `started[key]` in the order they started, `state` (seq →
 * `{ ended, signal }`, `ended` once the work's own promise settled or it returned or threw), and
 * `overlaps`: works that started while the previous one of their key still ran — neither ended
 * nor abandoned (an abandoned work's signal is aborted before the next one may start).
 */
function turnLog(keys) {
  const started = Array.from({ length: keys }, () => []);
  const state = new Map();
  const lastStarted = new Array(keys).fill(-1);
  const overlaps = [];
  return {
    started,
    state,
    overlaps,
    /** A work's start: answers its `{ ended, signal }` for it to mark its end. */
    start(key, seq, signal) {
      const previous = state.get(lastStarted[key]);
      if (previous !== undefined && !previous.ended && !previous.signal.aborted) {
        overlaps.push(`key ${key}: work ${seq} started while work ${lastStarted[key]} ran`);
      }
      lastStarted[key] = seq;
      started[key].push(seq);
      const mine = { ended: false, signal };
      state.set(seq, mine);
      return mine;
    },
  };
}

forEachMode(({ createKeyedSerializer, SerializedWorkTimeout }) => {
  test('random works keep per-key entry order and never overlap except after a timeout', () => onMockedTime(async (clock) => {
    const random = seededRandom(20261129);
    const TIMEOUT = 8;
    const serialize = createKeyedSerializer({ timeoutMs: TIMEOUT });
    const KEYS = 60;
    const WORKS = 12000;
    const entered = Array.from({ length: KEYS }, () => []);
    const { started, state, overlaps, start } = turnLog(KEYS);
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
        const mine = start(key, seq, signal);
        if (kind === 'throw') {
          mine.ended = true;
          throw new Error(`throw ${seq}`);
        }
        if (kind === 'sync') {
          mine.ended = true;
          return seq;
        }
        if (kind === 'never') return new Promise(() => {});
        return clock.sleep(delay).then(() => {
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
      if (random() < 0.01) await clock.advance(1);
    }
    await clock.settle(Promise.all(all));
    await clock.advance(30); // late settlements of abandoned works
    assert.deepEqual(overlaps, [], 'no work started while the previous one of its key ran');
    assert.deepEqual(started, entered, 'per key, works start in the order they entered');
    assert.equal(serialize.pending(), 0);
    assert.ok(outcomes.timedOut > 200, `exercises timeouts (${JSON.stringify(outcomes)})`);
    // Both ways of ending are exercised; how many of each time decides is the machine's (a busy
    // one's late timers turn fulfilled works into timed-out ones).
    assert.equal(outcomes.fulfilled + outcomes.rejected + outcomes.timedOut, WORKS, JSON.stringify(outcomes));
    assert.ok(outcomes.rejected > 200 && outcomes.fulfilled > 1000, JSON.stringify(outcomes));
    // onLateSettle reports exactly the abandoned works that settled after all.
    assert.deepEqual([...lateReported].sort((a, b) => a - b), [...lateExpected].sort((a, b) => a - b));
    assert.deepEqual(unhandled, []);
  }));

  test('random callers with signals aborting at random moments, own deadlines and a bound per key', () => onMockedTime(async (clock) => {
    const random = seededRandom(20261201);
    const MAX_PENDING = 8;
    const serialize = createKeyedSerializer({ timeoutMs: 10, maxPending: MAX_PENDING });
    const KEYS = 60;
    const WORKS = 8000;
    const accepted = Array.from({ length: KEYS }, () => []); // seqs queued, in entry order
    const { started, state, overlaps, start } = turnLog(KEYS);
    const counts = { fulfilled: 0, rejected: 0, timedOut: 0, aborted: 0, refused: 0, abortedBeforeStart: 0 };
    const all = [];
    const aborters = [];
    for (let seq = 0; seq < WORKS; seq++) {
      const key = Math.floor(random() * KEYS);
      const delay = Math.floor(random() * 14);
      const ownTimeout = random() < 0.3 ? 1 + Math.floor(random() * 20) : undefined;
      const controller = random() < 0.3 ? new AbortController() : undefined;
      const never = random() < 0.03;
      const work = (signal) => {
        const mine = start(key, seq, signal);
        if (never) return new Promise(() => {});
        return clock.sleep(delay).then(() => {
          mine.ended = true;
          return seq;
        });
      };
      const pendingBefore = serialize.pending(`key-${key}`);
      const result = serialize(`key-${key}`, work, { signal: controller?.signal, timeoutMs: ownTimeout });
      if (pendingBefore < MAX_PENDING) accepted[key].push(seq);
      all.push(
        result.then(
          (value) => {
            assert.equal(value, seq);
            counts.fulfilled += 1;
          },
          (error) => {
            if (error instanceof SerializedWorkTimeout) {
              assert.equal(error.timeoutMs, ownTimeout ?? 10);
              counts.timedOut += 1;
            } else if (error?.name === 'SerializedQueueFull') {
              assert.equal(pendingBefore, MAX_PENDING, 'refused only at the bound');
              counts.refused += 1;
            } else if (error === `abort ${seq}`) {
              counts.aborted += 1;
              if (!state.has(seq)) counts.abortedBeforeStart += 1;
            } else {
              assert.fail(`unexpected rejection of ${seq}: ${error}`);
            }
          },
        ),
      );
      if (controller !== undefined) {
        // Abort at a random moment: at once, after a few microtasks, or after some time.
        const when = random();
        if (when < 0.2) controller.abort(`abort ${seq}`);
        else if (when < 0.5) aborters.push(Promise.resolve().then(() => controller.abort(`abort ${seq}`)));
        else aborters.push(clock.sleep(Math.floor(random() * 30)).then(() => controller.abort(`abort ${seq}`)));
      }
      if (random() < 0.05) await clock.advance(1);
    }
    await clock.settle(Promise.all(all));
    await clock.settle(Promise.all(aborters));
    await clock.advance(40);
    assert.deepEqual(overlaps, [], 'no work started while the previous one of its key ran, unless that one was abandoned');
    // Per key, the works that started are the accepted ones in entry order, less those cancelled before they started.
    for (let key = 0; key < KEYS; key++) {
      const startedSet = new Set(started[key]);
      assert.deepEqual(started[key], accepted[key].filter((seq) => startedSet.has(seq)), `key ${key} order`);
    }
    assert.equal(serialize.pending(), 0);
    const stats = serialize.stats();
    assert.equal(stats.refused, counts.refused);
    assert.equal(stats.timedOut, counts.timedOut);
    assert.equal(stats.aborted, counts.aborted);
    assert.equal(stats.started, started.reduce((n, list) => n + list.length, 0));
    assert.equal(stats.running + stats.waiting + stats.keys, 0);
    assert.ok(counts.refused > 50 && counts.aborted > 300 && counts.abortedBeforeStart > 50 && counts.timedOut > 200 && counts.fulfilled > 2000, JSON.stringify(counts));
    assert.deepEqual(unhandled, []);
  }));
});
