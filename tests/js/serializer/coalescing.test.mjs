// Coalescing calls (`serialize(key, work, { coalesce })`), against pkg/, in both modes (see
// ../modes.mjs), with and without a store: who joins what, how joined callers settle, leave
// and hear late settlements, and randomized schedules that mix coalescing and plain calls with
// aborts and deadlines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

import { MapStore } from '../map-store.mjs';
import { deferred, seededRandom, watchProcess } from '../support.mjs';
import { forEachMode } from '../modes.mjs';
import { watchTimers } from '../../runtimes/timer-watch.mjs';

const require = createRequire(import.meta.url);
const cjs = require('keyturn');
const { noUnhandled } = watchProcess();

const rejection = (promise) => promise.then(
  (value) => assert.fail(`resolved with ${value}`),
  (error) => error,
);

forEachMode((mode) => {
  const { createKeyedSerializer, MemoryStore, SerializedWorkTimeout } = mode;

  /** A key busy with a work that runs until `gate` is resolved. */
  function busy(serialize, key = 'k') {
    const gate = deferred();
    const first = serialize(key, () => gate.promise);
    return { gate, first };
  }

  for (const withStore of [false, true]) {
    const made = withStore ? 'with a store' : 'without a store';
    const make = (options = {}) => createKeyedSerializer(withStore ? { store: new MemoryStore(), ...options } : options);

    test(`${made}: a burst behind a running work is one run; every caller gets its value, and its handlers run before the next work`, async () => {
      const timers = watchTimers();
      const serialize = make({ maxPending: 3 });
      const { gate, first } = busy(serialize);
      const log = [];
      let runs = 0;
      const value = { decided: true };
      const burst = [];
      for (let i = 0; i < 50; i++) {
        burst.push(serialize('k', async (signal, turn) => {
          runs += 1;
          log.push(`run ${i} fence>0 ${turn.fence > 0}`);
          return value;
        }, { coalesce: true }).then((got) => {
          log.push(`caller ${i}`);
          return got;
        }));
      }
      const next = serialize('k', () => log.push('next'));
      // The bound counts works: first, the burst's one, next. A joining call is never refused.
      assert.equal(serialize.pending('k'), 3);
      const late = serialize('k', () => log.push('late'), { coalesce: true });
      assert.equal(serialize.pending('k'), 3, 'the last work does not coalesce: this call queues, and is refused');
      assert.equal((await rejection(late)).name, 'SerializedQueueFull');
      gate.resolve();
      await first;
      const values = await Promise.all(burst);
      await next;
      assert.equal(runs, 1);
      assert.ok(values.every((got) => got === value), 'the same value');
      assert.deepEqual(log, [`run 0 fence>0 ${withStore}`, ...burst.map((_, i) => `caller ${i}`), 'next']);
      const stats = serialize.stats();
      assert.equal(stats.coalesced, 49);
      assert.equal(stats.started, 3);
      assert.equal(serialize.pending(), 0);
      timers.restore();
      // With a store, the lock manager's shared store-call timer may stay armed until its bound,
      // unref'd, by design (js/lock/flights.js); on Workers each call's own is cleared.
      const allowed = withStore && mode.name === 'direct' ? 1 : 0;
      assert.ok(timers.live.size <= allowed, `${timers.live.size} timers outlive the burst: no deadline or keep-alive timer may`);
      await noUnhandled();
    });

    test(`${made}: joined callers get the same error object, and a deadline's SerializedWorkTimeout`, async () => {
      const serialize = make({ timeoutMs: 40 });
      const { gate, first } = busy(serialize);
      const failure = new Error('read failed');
      const calls = [0, 1, 2].map(() => serialize('k', async () => {
        throw failure;
      }, { coalesce: 'acl' }));
      gate.resolve();
      await first;
      for (const call of calls) assert.equal(await rejection(call), failure);
      const { gate: gate2 } = busy(serialize);
      const slow = [0, 1, 2].map(() => serialize('k', () => new Promise(() => {}), { coalesce: 'acl' }));
      gate2.resolve();
      const errors = await Promise.all(slow.map(rejection));
      assert.ok(errors[0] instanceof SerializedWorkTimeout);
      assert.ok(errors.every((error) => error === errors[0]), 'one error object');
      assert.equal(serialize.stats().timedOut, 1, 'the slow run, once for its three callers');
      await noUnhandled();
    });
  }

  test('a call joins only the last waiting work of its group with the same deadline length', async () => {
    const serialize = createKeyedSerializer({ timeoutMs: 1000 });
    const { gate, first } = busy(serialize);
    const work = (name) => async () => name;
    const a = serialize('k', work('a'), { coalesce: true });
    const aSame = serialize('k', work('x'), { coalesce: true, timeoutMs: 1000 });
    const b = serialize('k', work('b'), { coalesce: 'acl' });
    const c = serialize('k', work('c'), { coalesce: true });
    const d = serialize('k', work('d'), { coalesce: true, timeoutMs: 500 });
    const e = serialize('k', work('e'), { coalesce: false });
    const f = serialize('k', work('f'), { coalesce: true });
    const fJoined = serialize('k', work('y'), { coalesce: true });
    assert.equal(serialize.pending('k'), 7);
    assert.equal(serialize.stats().coalesced, 2);
    gate.resolve();
    await first;
    assert.deepEqual(await Promise.all([a, aSame, b, c, d, e, f, fJoined]), ['a', 'a', 'b', 'c', 'd', 'e', 'f', 'f']);
    // A work queued on an idle key in the same synchronous run has not started: joinable.
    const g = serialize('idle', work('g'), { coalesce: true });
    const gJoined = serialize('idle', work('z'), { coalesce: true });
    assert.deepEqual(await Promise.all([g, gJoined]), ['g', 'g']);
    // A running work is never joined.
    const h = serialize('idle', () => sleep(5).then(() => 'h'), { coalesce: true });
    await sleep(1);
    const i = serialize('idle', work('i'), { coalesce: true });
    assert.deepEqual(await Promise.all([h, i]), ['h', 'i']);
    assert.equal(serialize.stats().coalesced, 3);
  });

  test('bad coalesce values reject with a TypeError and queue nothing; false coalesces nothing', async () => {
    const serialize = createKeyedSerializer();
    for (const bad of ['', 0, 1, null, {}, Symbol('s')]) {
      const error = await rejection(serialize('k', () => 1, { coalesce: bad }));
      assert.ok(error instanceof TypeError, String(bad));
      assert.match(error.message, /options\.coalesce must be true, false, a non-empty string or undefined/);
    }
    assert.equal(serialize.pending(), 0);
    const { gate, first } = busy(serialize);
    const plain = [1, 2].map((n) => serialize('k', async () => n, { coalesce: false }));
    assert.equal(serialize.pending('k'), 3);
    gate.resolve();
    await first;
    assert.deepEqual(await Promise.all(plain), [1, 2]);
    assert.equal(serialize.stats().coalesced, 0);
  });

  test("a joined caller's signal takes only that caller out; the last one out takes the work out", async () => {
    const serialize = createKeyedSerializer();
    const { gate, first } = busy(serialize);
    const controllers = [0, 1, 2].map(() => new AbortController());
    let ran = 0;
    const calls = controllers.map(({ signal }, i) => serialize('k', async () => {
      ran += 1;
      return i;
    }, { coalesce: true, signal }));
    // The caller that queued the work leaves, and one that joined it.
    let firstOut = false;
    calls[0].catch(() => {
      firstOut = true;
    });
    controllers[0].abort(new Error('zero left'));
    controllers[1].abort(new Error('one left'));
    assert.equal((await rejection(calls[1])).message, 'one left');
    // On Workers the caller that queued a shared work hears its reason when the work ends: its
    // request carries the work's promises (see InContextScheduler.leavesAtOnce).
    assert.equal(firstOut, mode.name === 'direct');
    assert.equal(serialize.pending('k'), 2, 'the work stays for the caller left');
    assert.equal(getEventListeners(controllers[0].signal, 'abort').length, 0);
    gate.resolve();
    await first;
    assert.equal(await calls[2], 0, "the queued work runs for those still waiting");
    assert.equal((await rejection(calls[0])).message, 'zero left');
    assert.equal(ran, 1);
    assert.equal(getEventListeners(controllers[2].signal, 'abort').length, 0, 'no listener stays');
    assert.equal(serialize.stats().aborted, 0);

    // Every caller of a waiting work leaves: it leaves the line and never runs.
    const second = busy(serialize);
    const leaving = [new AbortController(), new AbortController()];
    const gone = leaving.map(({ signal }) => serialize('k', () => {
      ran += 1;
    }, { coalesce: true, signal }));
    const after = serialize('k', () => 'after');
    leaving.forEach((controller) => controller.abort('bye'));
    assert.deepEqual(await Promise.all(gone.map(rejection)), ['bye', 'bye']);
    assert.equal(serialize.pending('k'), 2);
    second.gate.resolve();
    assert.equal(await after, 'after');
    assert.equal(ran, 1);
    assert.equal(serialize.stats().aborted, 1);

    // Every caller of a running work leaves: its signal aborts and the key moves on.
    const running = [new AbortController(), new AbortController()];
    let workSignal;
    const hung = running.map(({ signal }) => serialize('r', (own) => {
      workSignal = own;
      return new Promise(() => {});
    }, { coalesce: true, signal }));
    await sleep(2);
    running[0].abort('a');
    assert.equal(workSignal.aborted, false);
    running[1].abort('b');
    assert.equal(workSignal.aborted, true);
    assert.equal(workSignal.reason, 'b');
    assert.deepEqual(await Promise.all(hung.map(rejection)), ['a', 'b']);
    assert.equal(await serialize('r', () => 'moved on'), 'moved on');
    assert.equal(serialize.stats().aborted, 2);
    await noUnhandled();
  });

  test("each caller's onLateSettle is heard once when the shared work settles after its deadline", async () => {
    const serialize = createKeyedSerializer({ timeoutMs: 20 });
    const heard = [];
    const work = deferred();
    const calls = [0, 1, 2].map((i) => serialize('k', () => work.promise, {
      coalesce: true,
      onLateSettle: i === 1 ? undefined : (value) => {
        heard.push([i, value]);
        if (i === 0) throw new Error('dropped');
      },
    }));
    const errors = await Promise.all(calls.map(rejection));
    assert.ok(errors.every((error) => error instanceof SerializedWorkTimeout));
    work.resolve('late');
    await sleep(2);
    assert.deepEqual(heard, [[0, 'late'], [2, 'late']]);
    assert.equal(serialize.stats().lateSettled, 1);
    await noUnhandled();
  });

  test('with a store, each isolate coalesces in its own line; every run holds the lease', async () => {
    const records = new Map();
    const serializers = [
      mode.createKeyedSerializer({ store: new MapStore({ records }) }),
      cjs.createKeyedSerializer({ store: new MapStore({ records }) }),
    ];
    let live = 0;
    let maxLive = 0;
    const fences = [];
    const calls = [];
    for (let i = 0; i < 200; i++) {
      calls.push(serializers[i % 2]('object', async (signal, turn) => {
        live += 1;
        maxLive = Math.max(maxLive, live);
        fences.push(turn.fence);
        await sleep(2);
        live -= 1;
        return turn.fence;
      }, { coalesce: true }));
    }
    const answers = await Promise.all(calls);
    assert.equal(maxLive, 1);
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), String(fences));
    assert.ok(fences.length <= 4, `${fences.length} runs for 200 calls`);
    assert.ok(answers.every((fence) => fences.includes(fence)));
    assert.equal(serializers[0].stats().coalesced + serializers[1].stats().coalesced, 200 - fences.length);
    await noUnhandled();
  });

  for (const withStore of [false, true]) test(`randomized${withStore ? ', with a store' : ''}: coalescing and plain calls with aborts and deadlines; every call is answered by a run that started after it`, async () => {
    const random = seededRandom(withStore ? 29 : 23);
    const serialize = createKeyedSerializer({ timeoutMs: 30, maxPending: 6, ...(withStore ? { store: new MemoryStore() } : {}) });
    const keys = 8;
    const running = new Array(keys).fill(undefined);
    const overlaps = [];
    let seq = 0;
    let runs = 0;
    const outcomes = [];
    for (let round = 0; round < 40; round++) {
      for (let c = 0; c < 25; c++) {
        const key = Math.floor(random() * keys);
        const made = seq++;
        const group = random() < 0.7 ? (random() < 0.5 ? true : 'g') : undefined;
        const controller = random() < 0.15 ? new AbortController() : undefined;
        const ms = Math.floor(random() * 45);
        const timeoutMs = random() < 0.2 ? 20 : undefined;
        const work = async (signal) => {
          runs += 1;
          const run = { made, signal, ended: false };
          const before = running[key];
          if (before !== undefined && !before.ended && !before.signal.aborted) overlaps.push(`${key}: ${made} over ${before.made}`);
          running[key] = run;
          const callsMade = seq;
          await sleep(ms);
          run.ended = true;
          return { callsMade };
        };
        const call = serialize(`k${key}`, work, { coalesce: group, signal: controller?.signal, timeoutMs });
        outcomes.push(call.then(
          (value) => ({ made, value }),
          (error) => ({ made, error }),
        ));
        if (controller !== undefined) setTimeout(() => controller.abort('left'), Math.floor(random() * 40));
      }
      await sleep(Math.floor(random() * 15));
    }
    const settled = await Promise.all(outcomes);
    await sleep(60);
    assert.deepEqual(overlaps, []);
    for (const { made, value } of settled) {
      if (value !== undefined) assert.ok(value.callsMade > made, `call ${made} answered by a run that started after ${value.callsMade} calls`);
    }
    const errors = settled.filter(({ error }) => error !== undefined).map(({ error }) => error?.name ?? error);
    assert.ok(errors.every((name) => ['SerializedWorkTimeout', 'SerializedQueueFull', 'left'].includes(name)), String(errors));
    const stats = serialize.stats();
    assert.equal(serialize.pending(), 0);
    assert.equal(stats.started, runs);
    assert.ok(stats.coalesced > 100, `coalesced ${stats.coalesced}`);
    assert.ok(runs + stats.coalesced + stats.refused <= seq);
    await noUnhandled();
  });
});
