// A pace per key (`rate`) and `ifAvailable`, in one isolate, in both modes (see ../modes.mjs):
// at most `limit` starts of a key in any window of `periodMs`, in call order, with
// `concurrency`, a waiting work's signal and `maxPending`; a call that must start at once or
// be refused. Start times are the works' own (performance.now() as each is called), and held to
// the pace exactly, with no allowance, on a machine however busy: the engine times a start once
// its work's synchronous part ran (no earlier than the work read the clock), and lets the next
// window open only once its own clock, read when it decides, says it has. Upper bounds carry
// hundreds of ms of margin.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { forEachMode } from '../modes.mjs';

/** No `limit + 1` of `starts` (ms, in start order) within `periodMs`. */
function assertPaced(starts, limit, periodMs) {
  for (let i = 0; i + limit < starts.length; i++) {
    const gap = starts[i + limit] - starts[i];
    assert.ok(gap >= periodMs, `starts ${i} and ${i + limit} are ${gap.toFixed(2)} ms apart: ${starts.map((s) => s.toFixed(1))}`);
  }
}

forEachMode(({ createKeyedSerializer, SerializedWorkUnavailable, SerializedQueueFull, MemoryStore }) => {
  test('30 works on each of two keys at 5 per 200 ms: the first 5 at once, then no 6 within 200 ms, in call order, the 30th within 1.35 s', async () => {
    const serialize = createKeyedSerializer({ rate: { limit: 5, periodMs: 200 } });
    const t0 = performance.now();
    const starts = { a: [], b: [] };
    const order = { a: [], b: [] };
    const calls = [];
    for (let i = 0; i < 30; i++) {
      for (const key of ['a', 'b']) {
        calls.push(
          serialize(key, async () => {
            starts[key].push(performance.now() - t0);
            order[key].push(i);
          }),
        );
      }
    }
    await Promise.all(calls);
    for (const key of ['a', 'b']) {
      assert.deepEqual(order[key], Array.from({ length: 30 }, (_, i) => i), 'in call order');
      assert.ok(starts[key][4] < 150, `the first five at once: ${starts[key].slice(0, 5)}`);
      assertPaced(starts[key], 5, 200);
      assert.ok(starts[key][29] <= 1350, `the 30th at ${starts[key][29]} ms`);
    }
    const stats = serialize.stats();
    assert.equal(stats.started, 60);
    assert.ok(stats.paced >= 10, `works that waited for their pace: ${stats.paced}`);
    assert.equal(serialize.pending(), 0);
  });

  test('with concurrency 2 and 10 per 100 ms, never 3 run at once', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2, rate: { limit: 10, periodMs: 100 } });
    let running = 0;
    let widest = 0;
    const starts = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 40 }, () =>
        serialize('k', async () => {
          starts.push(performance.now() - t0);
          widest = Math.max(widest, ++running);
          await sleep(5);
          running--;
        }),
      ),
    );
    assert.equal(widest, 2);
    assertPaced(starts, 10, 100);
  });

  test('a key called again within its period waits as if it had stayed busy', async () => {
    const serialize = createKeyedSerializer({ rate: { limit: 2, periodMs: 400 } });
    const t0 = performance.now();
    await serialize('k', () => {});
    await serialize('k', () => {});
    assert.equal(serialize.pending(), 0, 'the key went idle');
    let third;
    await serialize('k', () => {
      third = performance.now() - t0;
    });
    assert.ok(third >= 400, `the third started at ${third} ms`);
  });

  test('a work waiting for its pace leaves on its signal, and maxPending bounds the line', async () => {
    const serialize = createKeyedSerializer({ rate: { limit: 1, periodMs: 300 }, maxPending: 3 });
    const ran = [];
    const first = serialize('k', () => ran.push(1));
    const controller = new AbortController();
    const second = serialize('k', () => ran.push(2), { signal: controller.signal });
    const third = serialize('k', () => ran.push(3));
    await assert.rejects(serialize('k', () => ran.push(4)), SerializedQueueFull);
    await first;
    controller.abort(new Error('gone'));
    await assert.rejects(second, /gone/);
    await third;
    assert.deepEqual(ran, [1, 3]);
    assert.equal(serialize.stats().aborted, 1);
  });

  test('ifAvailable: runs at once on a free key; refused at once, queueing nothing, when the pace or a work holds it up', async () => {
    const serialize = createKeyedSerializer({ rate: { limit: 2, periodMs: 500 } });
    assert.equal(await serialize('k', () => 'first', { ifAvailable: true }), 'first');
    assert.equal(await serialize('k', () => 'second', { ifAvailable: true }), 'second');
    let called = false;
    const sent = performance.now();
    const error = await serialize('k', () => (called = true), { ifAvailable: true }).then(
      () => assert.fail('refused'),
      (e) => e,
    );
    assert.ok(performance.now() - sent < 20 * 10, 'at once');
    assert.ok(error instanceof SerializedWorkUnavailable);
    assert.equal(error.name, 'SerializedWorkUnavailable');
    assert.equal(error.key, 'k');
    assert.ok(error.retryAfterMs > 0 && error.retryAfterMs <= 500, `retryAfterMs ${error.retryAfterMs}`);
    assert.equal(called, false);
    assert.equal(serialize.pending('k'), 0, 'nothing queued');

    // No pace: a running work is what holds it up, for a time keyturn cannot know.
    const plain = createKeyedSerializer();
    let release;
    const running = plain('k', () => new Promise((resolve) => (release = resolve)));
    const busy = await plain('k', () => {}, { ifAvailable: true }).catch((e) => e);
    assert.ok(busy instanceof SerializedWorkUnavailable);
    assert.equal(busy.retryAfterMs, undefined);
    assert.equal(await plain('other', () => 'free', { ifAvailable: true }), 'free');
    release();
    await running;
    assert.equal(plain.stats().unavailable, 1);
    assert.equal(serialize.stats().unavailable, 1);
  });

  test('bad rates and ifAvailable values are refused naming the field', () => {
    for (const [rate, kind, pattern] of [
      [{ limit: 0, periodMs: 100 }, RangeError, /options\.rate\.limit must be a whole number from 1 to 1000, got 0/],
      [{ limit: 1001, periodMs: 100 }, RangeError, /options\.rate\.limit/],
      [{ limit: 2.5, periodMs: 100 }, RangeError, /options\.rate\.limit/],
      [{ limit: 1, periodMs: 0 }, RangeError, /options\.rate\.periodMs must be a finite number from 1 to 2147483647/],
      [{ limit: 1, periodMs: 3e9 }, RangeError, /options\.rate\.periodMs/],
      [{ limit: 1, periodMs: Infinity }, RangeError, /options\.rate\.periodMs/],
      [{ limit: 1 }, TypeError, /options\.rate\.periodMs must be a number/],
      [{ limit: '5', periodMs: 100 }, TypeError, /options\.rate\.limit must be a number/],
      [{ limit: 1, period: 100 }, TypeError, /options\.rate has no option period: did you mean periodMs\?/],
      [{ limt: 1, periodMs: 100 }, TypeError, /did you mean limit\?/],
      [5, TypeError, /options\.rate must be an object/],
      [null, TypeError, /options\.rate must be an object/],
    ]) {
      assert.throws(() => createKeyedSerializer({ rate }), (error) => error instanceof kind && pattern.test(error.message), JSON.stringify(rate));
    }
    for (const concurrency of [1, 2]) assert.doesNotThrow(() => createKeyedSerializer({ rate: { limit: 1, periodMs: 10 }, concurrency, store: new MemoryStore() }));
    const serialize = createKeyedSerializer();
    assert.rejects(serialize('k', () => {}, { ifAvailable: 'yes' }), /options\.ifAvailable must be a boolean/);
    assert.rejects(serialize('k', () => {}, { ifAvalable: true }), /did you mean ifAvailable\?/);
  });
});
