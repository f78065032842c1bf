// The JS-facing serializer, against the built package (pkg/): every test in both modes (see
// ../modes.mjs). `--expose-gc` for the idle-memory test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { deferred, onMockedTime, watchProcess } from '../support.mjs';
import { forEachMode } from '../modes.mjs';

const require = createRequire(import.meta.url);

// Keeps the loop alive (the package's deadline timers are unref'd, as `keyed-serializer.js`'s are), and every
// test in this file also checks that nothing produced an unhandled rejection.
const { noUnhandled } = watchProcess();
const settleTurns = async () => {
  // Let pending microtasks and rejection tracking run.
  await sleep(5);
};

forEachMode(({ createKeyedSerializer, SerializedWorkTimeout }) => {
  test('works for one key never overlap and start in the order they entered', async () => {
    const serialize = createKeyedSerializer();
    const log = [];
    let running = 0;
    const work = (name, ms) => async () => {
      running += 1;
      assert.equal(running, 1, `${name} overlaps another work`);
      log.push(`start ${name}`);
      await sleep(ms);
      log.push(`end ${name}`);
      running -= 1;
      return name;
    };
    const results = await Promise.all([serialize('k', work('a', 15)), serialize('k', work('b', 1)), serialize('k', work('c', 5))]);
    assert.deepEqual(results, ['a', 'b', 'c']);
    assert.deepEqual(log, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    await noUnhandled();
  });

  test('different keys run concurrently', async () => {
    const serialize = createKeyedSerializer();
    const gate = deferred();
    const started = [];
    const a = serialize('a', async () => {
      started.push('a');
      await gate.promise;
    });
    const b = serialize('b', async () => {
      started.push('b');
    });
    await b;
    assert.deepEqual(started, ['a', 'b'], 'b ran while a was still running');
    gate.resolve();
    await a;
  });

  test('the work is called in a later microtask with a real AbortSignal', async () => {
    const serialize = createKeyedSerializer();
    let called = false;
    let signal;
    const result = serialize('k', (s) => {
      called = true;
      signal = s;
      return 'value';
    });
    assert.equal(called, false, 'not called inside serialize');
    assert.equal(await result, 'value');
    assert.ok(signal instanceof AbortSignal);
    assert.equal(signal.aborted, false);
  });

  test('the promise settles as the work does: same value, same error object', async () => {
    const serialize = createKeyedSerializer();
    const object = { a: 1 };
    assert.equal(await serialize('k', async () => object), object);
    assert.equal(await serialize('k', () => object), object);
    const error = new Error('boom');
    await assert.rejects(serialize('k', async () => { throw error; }), (e) => e === error);
    await assert.rejects(serialize('k', () => { throw error; }), (e) => e === error, 'a synchronous throw becomes a rejection');
    const notAnError = { reason: 'x' };
    await assert.rejects(serialize('k', () => Promise.reject(notAnError)), (e) => e === notAnError);
    // A thenable that is not a promise is adopted, as `Promise.resolve` does.
    assert.equal(await serialize('k', () => ({ then: (ok) => ok(42) })), 42);
    // A value that is a promise resolving to a thenable is flattened.
    assert.equal(await serialize('k', async () => Promise.resolve(7)), 7);
    await noUnhandled();
  });

  // On mocked time (../support.mjs): "not before the deadline, not long after it" is exact.
  test('after timeoutMs it rejects with SerializedWorkTimeout, aborts the signal, and the next work starts', () => onMockedTime(async (clock) => {
    const serialize = createKeyedSerializer({ timeoutMs: 40 });
    let signal;
    let abortedAt;
    const startedAt = performance.now();
    const slow = serialize('order-7', (s) => {
      signal = s;
      s.addEventListener('abort', () => {
        abortedAt = performance.now();
      });
      return new Promise(() => {});
    });
    let nextStartedAt;
    const next = serialize('order-7', () => {
      nextStartedAt = performance.now();
      assert.equal(signal.aborted, true, 'aborted before the next work starts');
      return 'next';
    });
    const error = await clock.settle(slow).then(
      () => assert.fail('resolved'),
      (e) => e,
    );
    assert.ok(error instanceof SerializedWorkTimeout);
    assert.ok(error instanceof Error);
    assert.equal(error.name, 'SerializedWorkTimeout');
    assert.equal(error.key, 'order-7');
    assert.equal(error.timeoutMs, 40);
    assert.equal(error.message, 'serialized work for order-7 timed out after 40 ms: released, the next notification re-decides');
    assert.equal(await clock.settle(next), 'next');
    assert.ok(abortedAt - startedAt >= 39, `not before the deadline (${abortedAt - startedAt} ms)`);
    assert.ok(abortedAt - startedAt < 40 + 200, `not long after it (${abortedAt - startedAt} ms)`);
    assert.ok(nextStartedAt >= abortedAt);
    assert.equal(serialize.pending(), 0);
    await noUnhandled();
  }));

  test('the timeout message is keyed-serializer.js\'s, word for word', async () => {
    // The text of keyed-serializer.js (the per-key serializer keyturn is a drop-in for), stated
    // here so the test needs nothing outside this repository; KEYTURN_SEED=<its path> also
    // checks it against that file itself.
    const seedText = (key, ms) => `serialized work for ${key} timed out after ${ms} ms: released, the next notification re-decides`;
    const serialize = createKeyedSerializer({ timeoutMs: 10 });
    const error = await serialize('k:1', () => new Promise(() => {})).catch((e) => e);
    assert.deepEqual([error.name, error.key, error.message], ['SerializedWorkTimeout', 'k:1', seedText('k:1', 10)]);
    if (process.env.KEYTURN_SEED) {
      const seed = require(process.env.KEYTURN_SEED).createKeyedSerializer({ timeoutMs: 10 });
      const seedError = await seed('k:1', () => new Promise(() => {})).catch((e) => e);
      assert.deepEqual([seedError.name, seedError.key, seedError.message], [error.name, error.key, error.message]);
    }
  });

  test('onLateSettle: once with the late value, undefined after a late rejection, its throw swallowed', async () => {
    const serialize = createKeyedSerializer({ timeoutMs: 10 });
    const reports = [];
    const late = deferred();
    const p1 = serialize('k', () => late.promise, { onLateSettle: (v) => reports.push(['resolved', v]) });
    await assert.rejects(p1, SerializedWorkTimeout);
    late.resolve('landed');
    await settleTurns();
    assert.deepEqual(reports, [['resolved', 'landed']]);

    const lateFailure = deferred();
    const p2 = serialize('k', () => lateFailure.promise, {
      onLateSettle: (v) => {
        reports.push(['rejected', v]);
        throw new Error('ignored');
      },
    });
    await assert.rejects(p2, SerializedWorkTimeout);
    lateFailure.reject(new Error('late failure'));
    await settleTurns();
    assert.deepEqual(reports, [['resolved', 'landed'], ['rejected', undefined]]);

    // Settled in time: never reported. Never settles: never reported.
    await serialize('k', async () => 'in time', { onLateSettle: () => reports.push(['wrong']) });
    await assert.rejects(serialize('k', () => new Promise(() => {}), { onLateSettle: () => reports.push(['never']) }));
    await sleep(30);
    assert.equal(reports.length, 2);
    await noUnhandled();
  });

  // On mocked time: the late rejection comes 30 ms after the works' 5 ms deadlines, exactly.
  test('no unhandled rejection: ignored results, late rejections, rejections nobody awaits', () => onMockedTime(async (clock) => {
    const serialize = createKeyedSerializer({ timeoutMs: 5 });
    serialize('k', () => {
      throw new Error('ignored sync');
    });
    serialize('k', async () => {
      throw new Error('ignored async');
    });
    const late = deferred();
    serialize('k', () => late.promise);
    serialize('k', () => new Promise(() => {}));
    serialize('', () => 1);
    serialize('k', 'not a function');
    await clock.advance(30);
    late.reject(new Error('late'));
    await noUnhandled();
    assert.equal(serialize.pending(), 0);
  }));

  test('pending() counts keys with queued or running work, and an idle key holds no memory', async () => {
    const serialize = createKeyedSerializer();
    const gate = deferred();
    const all = [];
    for (let i = 0; i < 20000; i++) all.push(serialize(`key-${i}`, () => gate.promise));
    all.push(serialize('key-0', () => 'second'));
    assert.equal(serialize.pending(), 20000);
    await settleTurns();
    assert.equal(serialize.pending(), 20000);
    gate.resolve();
    await Promise.all(all);
    assert.equal(serialize.pending(), 0);
  });

  test('an idle key keeps no reference to its works (they are garbage collected)', { skip: typeof globalThis.gc !== 'function' && 'needs --expose-gc' }, async () => {
    const serialize = createKeyedSerializer();
    let collected = 0;
    const registry = new FinalizationRegistry(() => {
      collected += 1;
    });
    await (async () => {
      const results = [];
      for (let i = 0; i < 2000; i++) {
        const work = async () => ({ payload: new Array(100).fill(i) });
        registry.register(work, i);
        results.push(serialize(`gc-${i}`, work));
      }
      await Promise.all(results);
    })();
    assert.equal(serialize.pending(), 0);
    for (let i = 0; i < 10 && collected < 2000; i++) {
      globalThis.gc();
      await sleep(10);
    }
    assert.equal(collected, 2000, 'every finished work was released');
  });

  test('a pending deadline does not keep a Node process alive', () => {
    const script = `
      import { createKeyedSerializer } from 'keyturn';
      const serialize = createKeyedSerializer();
      serialize('k', () => new Promise(() => {}));
      serialize('k', () => 'queued behind it');
    `;
    const started = Date.now();
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd(), timeout: 10000 });
    assert.equal(run.status, 0, String(run.stderr));
    assert.ok(Date.now() - started < 5000, 'exited without waiting for the 30 s deadline');
  });

  test('bad input: TypeError or RangeError naming the argument, and nothing changes', async () => {
    assert.throws(() => createKeyedSerializer({ timeoutMs: 0 }), (e) => e instanceof RangeError && /timeoutMs/.test(e.message));
    assert.throws(() => createKeyedSerializer({ timeoutMs: -5 }), RangeError);
    assert.throws(() => createKeyedSerializer({ timeoutMs: NaN }), RangeError);
    assert.throws(() => createKeyedSerializer({ timeoutMs: Infinity }), RangeError);
    assert.throws(() => createKeyedSerializer({ timeoutMs: 2 ** 31 }), RangeError);
    assert.throws(() => createKeyedSerializer({ timeoutMs: '100' }), (e) => e instanceof TypeError && /timeoutMs/.test(e.message));
    assert.throws(() => createKeyedSerializer(null), (e) => e instanceof TypeError && /options/.test(e.message));
    assert.throws(() => createKeyedSerializer(42), TypeError);
    assert.equal(typeof createKeyedSerializer({ timeoutMs: 2 ** 31 - 1 }), 'function');
    assert.equal(typeof createKeyedSerializer({}), 'function');

    const serialize = createKeyedSerializer();
    const cases = [
      [() => serialize(undefined, () => 1), TypeError, /key/],
      [() => serialize(5, () => 1), TypeError, /key/],
      [() => serialize({}, () => 1), TypeError, /key/],
      [() => serialize('', () => 1), TypeError, /key/],
      [() => serialize('\ud800', () => 1), TypeError, /key/],
      [() => serialize('x'.repeat(513), () => 1), RangeError, /key/],
      [() => serialize('€'.repeat(171), () => 1), RangeError, /key/],
      [() => serialize('k'), TypeError, /work/],
      [() => serialize('k', 'work'), TypeError, /work/],
      [() => serialize('k', () => 1, null), TypeError, /options/],
      [() => serialize('k', () => 1, { onLateSettle: 'yes' }), TypeError, /onLateSettle/],
    ];
    for (const [call, type, pattern] of cases) {
      await assert.rejects(call(), (e) => e instanceof type && pattern.test(e.message) && e.message.startsWith('keyturn: '));
      assert.equal(serialize.pending(), 0, 'a rejected call queues nothing');
    }
    // A bad call on a busy key leaves its queue as it was.
    const gate = deferred();
    const first = serialize('busy', () => gate.promise);
    await assert.rejects(serialize('busy', 'not a function'), TypeError);
    const second = serialize('busy', () => 'second');
    gate.resolve('first');
    assert.deepEqual(await Promise.all([first, second]), ['first', 'second']);
    assert.equal(await serialize('x'.repeat(512), () => 'at the limit'), 'at the limit');
    await noUnhandled();
  });

  test('re-entrant calls from an options getter, even one that throws, keep every key in order', async () => {
    const serialize = createKeyedSerializer();
    const log = [];
    const gateA = deferred();
    const gateB = deferred();
    const first = serialize('a', () => gateA.promise);
    const nested = [];
    const getterError = new Error('getter');
    const options = {
      get onLateSettle() {
        nested.push(serialize('b', () => gateB.promise.then(() => log.push('b1 end'))));
        nested.push(serialize('b', () => log.push('b2')));
        throw getterError;
      },
    };
    await assert.rejects(serialize('a', () => log.push('never'), options), (e) => e === getterError);
    const second = serialize('a', () => {
      log.push('a2');
      return 'second';
    });
    await sleep(5);
    assert.deepEqual(log, [], 'the failed call queued nothing and moved no key on');
    gateB.resolve();
    await Promise.all(nested);
    assert.deepEqual(log, ['b1 end', 'b2']);
    gateA.resolve('first');
    assert.deepEqual(await Promise.all([first, second]), ['first', 'second']);
    assert.deepEqual(log, ['b1 end', 'b2', 'a2']);
    assert.equal(serialize.pending(), 0);
    await noUnhandled();
  });

  test('random garbage at every export never breaks the module', async () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const garbage = () => {
      const pool = [
        undefined, null, 0, -1, NaN, Infinity, 2 ** 53, 1e300, -0, '', 'k', '\ud800', '\udfff\ud800', 'x'.repeat(600),
        true, false, Symbol('s'), 10n, {}, [], () => {}, async () => {}, new Proxy({}, { get() { throw new Error('trap'); } }),
        { timeoutMs: random() * 1e10 - 1e5 }, { timeoutMs: 'x' }, { onLateSettle: 5 }, { onLateSettle: () => {} },
        Object.create(null), new Date(), /re/, new Error('e'), Promise.reject(new Error('r')).catch(() => {}) && { then: 5 },
      ];
      return pool[Math.floor(random() * pool.length)];
    };
    const serializers = [createKeyedSerializer({ timeoutMs: 20 })];
    for (let i = 0; i < 3000; i++) {
      try {
        serializers.push(createKeyedSerializer(garbage()));
      } catch (e) {
        assert.ok(e instanceof TypeError || e instanceof RangeError || e.message === 'trap', String(e));
      }
      const serialize = serializers[Math.floor(random() * serializers.length)];
      const args = [garbage(), garbage(), garbage()];
      const result = serialize(...args);
      assert.ok(result instanceof Promise);
      result.catch(() => {});
      try {
        serialize.pending(garbage());
      } catch (e) {
        assert.fail(`pending threw ${e}`);
      }
    }
    await sleep(50);
    // Still works afterwards.
    const serialize = createKeyedSerializer();
    assert.deepEqual(await Promise.all([serialize('after', async () => 1), serialize('after', () => 2)]), [1, 2]);
    assert.equal(serialize.pending(), 0);
    await noUnhandled();
  });
});
