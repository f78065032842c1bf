// N at a time per key (`concurrency`), in one isolate: at most N works of a key run at once,
// they start in call order, each in a slot of its own, and deadlines, signals, `maxPending`,
// coalescing and the counters stay per work. In both modes (see ../modes.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as immediate, setTimeout as sleep } from 'node:timers/promises';

import { seededRandom } from '../support.mjs';
import { forEachMode } from '../modes.mjs';

/** A promise and its resolver. */
function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

forEachMode(({ createKeyedSerializer, SerializedWorkTimeout, SerializedQueueFull, MemoryStore }) => {
  test('1 000 keys, 100 000 works at concurrency 4: never more than 4 of a key at once, started in call order, each in a free slot', async () => {
    const random = seededRandom(20261204);
    const serialize = createKeyedSerializer({ concurrency: 4 });
    const keys = 1000;
    const running = new Array(keys).fill(0);
    const slots = Array.from({ length: keys }, () => new Set());
    const called = Array.from({ length: keys }, () => []);
    const started = Array.from({ length: keys }, () => []);
    let widest = 0;
    const results = [];
    for (let seq = 0; seq < 100_000; seq++) {
      const key = Math.floor(random() * keys);
      const ticks = Math.floor(random() * 4);
      const slow = random() < 0.01;
      called[key].push(seq);
      results.push(
        serialize(`k${key}`, async (_signal, turn) => {
          assert.ok(turn.slot >= 0 && turn.slot < 4, `slot ${turn.slot}`);
          assert.ok(!slots[key].has(turn.slot), `work ${seq} took slot ${turn.slot} in use`);
          slots[key].add(turn.slot);
          running[key] += 1;
          widest = Math.max(widest, running[key]);
          assert.ok(running[key] <= 4, `key ${key}: ${running[key]} running`);
          started[key].push(seq);
          for (let i = 0; i < ticks; i++) await null;
          if (slow) await immediate();
          running[key] -= 1;
          slots[key].delete(turn.slot);
          return seq;
        }),
      );
    }
    const values = await Promise.all(results);
    assert.deepEqual(values, values.map((_, i) => i));
    assert.deepEqual(started, called, 'every key started its works in call order');
    assert.equal(widest, 4, 'keys ran four works at once');
    assert.equal(serialize.pending(), 0);
    const stats = serialize.stats();
    assert.equal(stats.started, 100_000);
    assert.equal(stats.running, 0);
  });

  test('a caller’s handlers on a work’s promise run before the work that takes its slot starts', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2 });
    const log = [];
    const gates = [deferred(), deferred()];
    const first = serialize('k', () => gates[0].promise);
    serialize('k', () => gates[1].promise);
    serialize('k', (_signal, turn) => log.push(`third starts in slot ${turn.slot}`));
    first.then(() => log.push('handler of first'));
    await immediate();
    assert.deepEqual(log, [], 'two run; the third waits');
    gates[0].resolve('one');
    await immediate();
    assert.deepEqual(log, ['handler of first', 'third starts in slot 0']);
    gates[1].resolve('two');
  });

  test('deadlines are per work: one that times out frees its slot once its caller heard, and its late settlement is reported', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2, timeoutMs: 40 });
    const late = [];
    const log = [];
    const hung = serialize('k', () => sleep(120).then(() => 'late'), { onLateSettle: (value) => late.push(value) });
    const quick = serialize('k', async (_signal, turn) => {
      log.push(`quick in slot ${turn.slot}`);
      return 'quick';
    });
    const after = serialize('k', async (signal, turn) => {
      log.push(`after in slot ${turn.slot}`);
      return signal.aborted;
    });
    await assert.rejects(hung, SerializedWorkTimeout);
    assert.equal(await quick, 'quick');
    assert.equal(await after, false);
    assert.deepEqual(log, ['quick in slot 1', 'after in slot 1'], 'the hung work held slot 0 until its deadline');
    assert.equal(serialize.stats().timedOut, 1);
    await sleep(120);
    assert.deepEqual(late, ['late']);
  });

  test('signals are per work: a waiting work leaves its line, a running one is abandoned and frees its slot', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2 });
    const gates = [deferred(), deferred()];
    const order = [];
    const a = serialize('k', () => gates[0].promise);
    const runningController = new AbortController();
    const b = serialize('k', () => gates[1].promise, { signal: runningController.signal });
    const waitingController = new AbortController();
    const c = serialize('k', () => order.push('c'), { signal: waitingController.signal });
    const d = serialize('k', (_signal, turn) => order.push(`d in slot ${turn.slot}`));
    await immediate();
    assert.equal(serialize.pending('k'), 4);
    waitingController.abort(new Error('c gave up'));
    await assert.rejects(c, /c gave up/);
    assert.equal(serialize.pending('k'), 3);
    runningController.abort(new Error('b gave up'));
    await assert.rejects(b, /b gave up/);
    await d;
    assert.deepEqual(order, ['d in slot 1'], 'd took the slot b left; c never ran');
    gates[0].resolve('a');
    assert.equal(await a, 'a');
    assert.equal(serialize.stats().aborted, 2);
    gates[1].resolve();
  });

  test('maxPending counts works, running and waiting', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2, maxPending: 3 });
    const gate = deferred();
    const accepted = [1, 2, 3].map(() => serialize('k', () => gate.promise));
    await assert.rejects(serialize('k', () => {}), SerializedQueueFull);
    await immediate();
    assert.equal(serialize.stats().running, 2);
    assert.equal(serialize.stats().waiting, 1);
    gate.resolve('done');
    assert.deepEqual(await Promise.all(accepted), ['done', 'done', 'done']);
    assert.equal(serialize.stats().refused, 1);
  });

  test('a coalescing call joins only a work that has not started', async () => {
    const serialize = createKeyedSerializer({ concurrency: 2 });
    const gate = deferred();
    const runs = [];
    serialize('k', () => gate.promise);
    // Its turn has come (one work ahead, two slots) but it starts two microtasks later.
    const first = serialize('k', () => runs.push('first') && 'decided', { coalesce: true });
    const joined = serialize('k', () => runs.push('joined'), { coalesce: true });
    assert.equal(serialize.stats().coalesced, 1);
    assert.equal(await joined, 'decided');
    assert.equal(await first, 'decided');
    const busy = serialize('k', () => gate.promise, { coalesce: true });
    await immediate();
    const fresh = serialize('k', () => runs.push('fresh') && 'fresh', { coalesce: true });
    assert.equal(serialize.stats().coalesced, 1, 'a started work is never joined');
    gate.resolve('open');
    assert.equal(await fresh, 'fresh');
    await busy;
    assert.deepEqual(runs, ['first', 'fresh']);
  });

  test('at concurrency 1 (the default) every work runs in slot 0, one at a time', async () => {
    const serialize = createKeyedSerializer();
    const turns = await Promise.all([1, 2, 3].map(() => serialize('k', (_signal, turn) => turn)));
    assert.deepEqual(turns.map((turn) => [turn.slot, turn.fence]), [[0, 0], [0, 0], [0, 0]]);
    assert.ok(Object.isFrozen(turns[0]));
  });

  test('concurrency is a whole number from 1 to 1024', () => {
    for (const good of [1, 2, 1024, undefined]) createKeyedSerializer({ concurrency: good });
    for (const bad of [0, -1, 1.5, 1025, NaN, Infinity]) {
      assert.throws(() => createKeyedSerializer({ concurrency: bad }), {
        name: 'RangeError',
        message: `keyturn: options.concurrency must be a whole number from 1 to 1024, got ${bad}`,
      });
    }
    assert.throws(() => createKeyedSerializer({ concurrency: '2' }), { name: 'TypeError', message: /options\.concurrency/ });
    for (const good of [1, 3]) createKeyedSerializer({ concurrency: good, store: new MemoryStore() });
    assert.throws(() => createKeyedSerializer({ concurrency: 0, store: new MemoryStore() }), { name: 'RangeError' });
  });
});
