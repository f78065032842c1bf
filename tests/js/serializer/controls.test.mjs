// The serializer's controls, against the built package: a caller's `signal`, `maxPending`, a
// per-call `timeoutMs`, `pending(key)` and `stats()`. In both modes (see ../modes.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

import { deferred, onMockedTime, watchProcess } from '../support.mjs';
import { forEachMode } from '../modes.mjs';

const { noUnhandled } = watchProcess();

const rejection = (promise) => promise.then(
  (value) => assert.fail(`resolved with ${value}`),
  (error) => error,
);

forEachMode(({ createKeyedSerializer, SerializedQueueFull, SerializedWorkTimeout }) => {
  test('signal already aborted: rejects with its reason at once and queues nothing', async () => {
    const serialize = createKeyedSerializer();
    const controller = new AbortController();
    const reason = new Error('client went away');
    controller.abort(reason);
    let called = false;
    const result = serialize('k', () => {
      called = true;
    }, { signal: controller.signal });
    assert.equal(serialize.pending(), 0);
    assert.equal(serialize.pending('k'), 0);
    assert.equal(await rejection(result), reason);
    await sleep(2);
    assert.equal(called, false);
    assert.deepEqual(serialize.stats(), { keys: 0, running: 0, waiting: 0, started: 0, timedOut: 0, aborted: 0, refused: 0, lateSettled: 0, coalesced: 0, paced: 0, unavailable: 0 });
    // The key is still checked: a bad key is a TypeError even with an aborted signal.
    await assert.rejects(serialize('', () => 1, { signal: controller.signal }), TypeError);
    await noUnhandled();
  });

  test('signal aborted while waiting: rejects at once, leaves the line, never runs; those behind move up', async () => {
    const serialize = createKeyedSerializer();
    const gate = deferred();
    const log = [];
    const first = serialize('k', async () => {
      log.push('first');
      await gate.promise;
    });
    const controller = new AbortController();
    const waiting = serialize('k', () => log.push('cancelled'), { signal: controller.signal });
    const third = serialize('k', () => log.push('third'));
    await sleep(1);
    assert.equal(serialize.pending('k'), 3);
    assert.equal(serialize.stats().waiting, 2);
    controller.abort('stop');
    assert.equal(serialize.pending('k'), 2, 'left the line at once');
    assert.equal(await rejection(waiting), 'stop');
    assert.deepEqual(log, ['first'], 'nothing else ran yet: the first still runs');
    gate.resolve();
    await Promise.all([first, third]);
    assert.deepEqual(log, ['first', 'third']);
    assert.equal(serialize.stats().aborted, 1);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    assert.equal(serialize.pending(), 0);
    await noUnhandled();
  });

  test('signal aborted while its work waits at the head of an idle key, before it started', async () => {
    const serialize = createKeyedSerializer();
    const controller = new AbortController();
    const log = [];
    const cancelled = serialize('k', () => log.push('cancelled'), { signal: controller.signal });
    const next = serialize('k', () => log.push('next'));
    controller.abort('early');
    assert.equal(await rejection(cancelled), 'early');
    await next;
    assert.deepEqual(log, ['next']);
    assert.equal(serialize.pending(), 0);
  });

  test('signal aborted while running: the work\'s signal aborts with the same reason, the key moves on, onLateSettle applies', async () => {
    const serialize = createKeyedSerializer({ timeoutMs: 10_000 });
    const controller = new AbortController();
    const hung = deferred();
    const late = [];
    let workSignal;
    const log = [];
    const running = serialize('k', (signal) => {
      workSignal = signal;
      log.push('running');
      return hung.promise;
    }, { signal: controller.signal, onLateSettle: (value) => late.push(value) });
    const next = serialize('k', () => log.push('next'));
    await sleep(1);
    const reason = new Error('request aborted');
    controller.abort(reason);
    assert.equal(workSignal.aborted, true);
    assert.equal(workSignal.reason, reason, 'the same reason');
    assert.equal(await rejection(running), reason);
    await next;
    assert.deepEqual(log, ['running', 'next'], 'the key moved on without waiting for the abandoned work');
    hung.resolve('landed late');
    await sleep(1);
    assert.deepEqual(late, ['landed late']);
    const stats = serialize.stats();
    assert.equal(stats.aborted, 1);
    assert.equal(stats.lateSettled, 1);
    assert.equal(stats.timedOut, 0);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    await noUnhandled();
  });

  test('once a work settled, aborting its signal changes nothing', async () => {
    const serialize = createKeyedSerializer();
    const controller = new AbortController();
    let workSignal;
    const value = await serialize('k', async (signal) => {
      workSignal = signal;
      return 'done';
    }, { signal: controller.signal });
    controller.abort();
    assert.equal(value, 'done');
    assert.equal(workSignal.aborted, false);
    assert.equal(serialize.stats().aborted, 0);
  });

  test('1000 works sharing one long-lived signal leave no listener on it', async () => {
    const serialize = createKeyedSerializer();
    const controller = new AbortController();
    const gate = deferred();
    const results = [];
    for (let i = 0; i < 1000; i++) {
      results.push(serialize(`k${i % 10}`, async () => {
        await gate.promise;
        return i;
      }, { signal: controller.signal }));
    }
    assert.equal(getEventListeners(controller.signal, 'abort').length, 1000, 'one listener per unsettled work');
    gate.resolve();
    const values = await Promise.all(results);
    assert.equal(values[999], 999);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  });

  test('maxPending: a call over the bound rejects at once with SerializedQueueFull and queues nothing', async () => {
    const serialize = createKeyedSerializer({ maxPending: 2 });
    const gate = deferred();
    const log = [];
    const first = serialize('k', async () => {
      await gate.promise;
      log.push(1);
    });
    const second = serialize('k', () => log.push(2));
    const refused = serialize('k', () => log.push('refused'));
    const error = await rejection(refused);
    assert.ok(error instanceof SerializedQueueFull);
    assert.equal(error.name, 'SerializedQueueFull');
    assert.equal(error.key, 'k');
    assert.equal(error.maxPending, 2);
    assert.equal(error.message, 'serialized work for k refused: 2 works are queued or running for it already');
    assert.equal(serialize.pending('k'), 2);
    // Another key has room of its own.
    assert.equal(await serialize('other', () => 'fine'), 'fine');
    gate.resolve();
    await Promise.all([first, second]);
    assert.deepEqual(log, [1, 2]);
    assert.equal(serialize.stats().refused, 1);
    // Once the line drained, the key takes calls again.
    assert.equal(await serialize('k', () => 'again'), 'again');
    await noUnhandled();
  });

  test('maxPending: a work abandoned at its deadline no longer counts', async () => {
    const serialize = createKeyedSerializer({ maxPending: 1, timeoutMs: 15 });
    const hung = serialize('k', () => new Promise(() => {}));
    await assert.rejects(serialize('k', () => 'refused'), SerializedQueueFull);
    await assert.rejects(hung, SerializedWorkTimeout);
    assert.equal(serialize.pending('k'), 0);
    assert.equal(await serialize('k', () => 'room again'), 'room again');
  });

  test('a per-call timeoutMs: its own deadline, and its timeout error carries it', async () => {
    const serialize = createKeyedSerializer({ timeoutMs: 60_000 });
    const started = performance.now();
    const error = await rejection(serialize('k', () => new Promise(() => {}), { timeoutMs: 20 }));
    assert.ok(error instanceof SerializedWorkTimeout);
    assert.equal(error.timeoutMs, 20);
    assert.equal(error.message, 'serialized work for k timed out after 20 ms: released, the next notification re-decides');
    assert.ok(performance.now() - started >= 19, 'not before its deadline');
    // Longer than the serializer's own: the serializer's deadline does not cut it short.
    const short = createKeyedSerializer({ timeoutMs: 10 });
    assert.equal(await short('k', () => sleep(30).then(() => 'in time'), { timeoutMs: 1000 }), 'in time');
    // Mixed deadlines on one shared timer: each work times out at its own.
    const mixed = createKeyedSerializer({ timeoutMs: 200 });
    const order = [];
    await Promise.allSettled([
      mixed('a', () => new Promise(() => {})).catch(() => order.push('a 200')),
      mixed('b', () => new Promise(() => {}), { timeoutMs: 10 }).catch(() => order.push('b 10')),
      mixed('c', () => new Promise(() => {}), { timeoutMs: 60 }).catch(() => order.push('c 60')),
    ]);
    assert.deepEqual(order, ['b 10', 'c 60', 'a 200']);
    assert.equal(mixed.stats().timedOut, 3);
  });

  // On mocked time (../support.mjs): looked at 1 ms in, nothing has met its 20 ms deadline.
  test('pending(key) and stats() say what is queued, running and what happened', () => onMockedTime(async (clock) => {
    const serialize = createKeyedSerializer({ timeoutMs: 20 });
    const gate = deferred();
    const results = [
      serialize('a', () => gate.promise),
      serialize('a', () => 'a2'),
      serialize('a', () => 'a3'),
      serialize('b', () => gate.promise),
    ];
    await clock.advance(1);
    assert.equal(serialize.pending(), 2);
    assert.equal(serialize.pending('a'), 3);
    assert.equal(serialize.pending('b'), 1);
    assert.equal(serialize.pending('idle'), 0);
    assert.deepEqual(serialize.stats(), { keys: 2, running: 2, waiting: 2, started: 2, timedOut: 0, aborted: 0, refused: 0, lateSettled: 0, coalesced: 0, paced: 0, unavailable: 0 });
    await clock.settle(Promise.allSettled(results));
    gate.resolve('late');
    await clock.advance(2);
    assert.deepEqual(serialize.stats(), { keys: 0, running: 0, waiting: 0, started: 4, timedOut: 2, aborted: 0, refused: 0, lateSettled: 0, coalesced: 0, paced: 0, unavailable: 0 });
    assert.equal(serialize.pending('a'), 0);
  }));

  test('bad controls: TypeError or RangeError naming the argument, and nothing queued', async () => {
    for (const [options, type, pattern] of [
      [{ maxPending: 0 }, RangeError, /maxPending/],
      [{ maxPending: -1 }, RangeError, /maxPending/],
      [{ maxPending: 1.5 }, RangeError, /maxPending/],
      [{ maxPending: NaN }, RangeError, /maxPending/],
      [{ maxPending: '3' }, TypeError, /maxPending/],
    ]) {
      assert.throws(() => createKeyedSerializer(options), (e) => e instanceof type && pattern.test(e.message) && e.message.startsWith('keyturn: '));
    }
    assert.equal(typeof createKeyedSerializer({ maxPending: Infinity }), 'function');
    assert.equal(typeof createKeyedSerializer({ maxPending: 1 }), 'function');

    const serialize = createKeyedSerializer();
    const gate = deferred();
    const busy = serialize('busy', () => gate.promise);
    for (const key of ['idle', 'busy']) {
      for (const [options, type, pattern] of [
        [{ signal: {} }, TypeError, /options\.signal/],
        [{ signal: 'abort' }, TypeError, /options\.signal/],
        [{ signal: null }, TypeError, /options\.signal/],
        [{ timeoutMs: 0 }, RangeError, /options\.timeoutMs/],
        [{ timeoutMs: -1 }, RangeError, /options\.timeoutMs/],
        [{ timeoutMs: Infinity }, RangeError, /options\.timeoutMs/],
        [{ timeoutMs: 2 ** 31 }, RangeError, /options\.timeoutMs/],
        [{ timeoutMs: NaN }, RangeError, /options\.timeoutMs/],
        [{ timeoutMs: '5' }, TypeError, /options\.timeoutMs/],
        [{ onLateSettle: 1 }, TypeError, /options\.onLateSettle/],
      ]) {
        await assert.rejects(serialize(key, () => 'never', options), (e) => e instanceof type && pattern.test(e.message) && e.message.startsWith('keyturn: '), JSON.stringify(options));
      }
    }
    assert.equal(serialize.pending('busy'), 1, 'nothing queued behind the busy key');
    assert.equal(serialize.pending('idle'), 0);
    gate.resolve();
    await busy;
    assert.equal(serialize.pending(), 0);
    await noUnhandled();
  });
});
