// The microtask order of keyed-serializer.js (the per-key serializer keyturn is a drop-in for,
// not in this repository): the handlers a caller attached to a work's promise — `.then` chains
// and `await` continuations — run before the next work of the key starts, exactly as there, for
// a resolved, a rejected and a timed-out work, whether the handlers were attached before or
// after the next work was queued. The expected orders below are what that file prints;
// KEYTURN_SEED=<path to it> runs it through the same scenarios and checks that they still are. In both modes (see ../modes.mjs).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { forEachMode } from '../modes.mjs';

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

async function scenario(create, outcome, handlersFirst) {
  const log = [];
  // A's deadline: 10 ms where it times out; where A settles (2 ms in), one it cannot reach
  // however late a busy machine runs the 2 ms timer.
  const serialize = create({ timeoutMs: outcome === 'timedOut' ? 10 : 10_000 });
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  const a = serialize('k', async () => {
    log.push('A start');
    await gate;
    if (outcome === 'rejected') throw new Error('A failed');
    return 'a';
  });
  const attach = () => {
    a.then(
      () => log.push('then1'),
      () => log.push('catch1'),
    )
      .then(() => log.push('then2'))
      .then(() => log.push('then3'))
      .then(() => log.push('then4'));
    (async () => {
      try {
        await a;
        log.push('await1 ok');
      } catch {
        log.push('await1 caught');
      }
      await null;
      log.push('await2');
      await null;
      log.push('await3');
    })();
  };
  if (handlersFirst) attach();
  const b = serialize('k', () => {
    log.push('B start');
  });
  if (!handlersFirst) attach();
  const other = serialize('other', () => {
    log.push('other start');
  });
  await sleep(2);
  if (outcome !== 'timedOut') {
    log.push('settle A');
    release();
  }
  await Promise.allSettled([a, b, other]);
  await sleep(20);
  return log.join(', ');
}

const expected = {
  resolved: 'A start, other start, settle A, then1, await1 ok, then2, await2, B start, then3, await3, then4',
  rejected: 'A start, other start, settle A, catch1, await1 caught, then2, await2, B start, then3, await3, then4',
  timedOut: 'A start, other start, catch1, await1 caught, then2, await2, B start, then3, await3, then4',
};

forEachMode(({ createKeyedSerializer }) => {
  for (const outcome of ['resolved', 'rejected', 'timedOut']) {
    for (const handlersFirst of [true, false]) {
      const when = handlersFirst ? 'handlers attached before the next work is queued' : 'handlers attached after it';
      test(`keyed-serializer.js's order around a ${outcome} work, ${when}`, async () => {
        assert.equal(await scenario(createKeyedSerializer, outcome, handlersFirst), expected[outcome]);
        if (process.env.KEYTURN_SEED) {
          const seed = createRequire(import.meta.url)(process.env.KEYTURN_SEED).createKeyedSerializer;
          assert.equal(await scenario(seed, outcome, handlersFirst), expected[outcome], 'the seed itself');
        }
      });
    }
  }

  async function idleKeyOrder(create) {
    const log = [];
    const serialize = create();
    serialize('k', () => log.push('work'));
    log.push('sync');
    await null;
    log.push('tick 1');
    await null;
    log.push('tick 2');
    await null;
    log.push('tick 3');
    return log;
  }

  test('an idle key\'s work is called two microtasks after serialize, as keyed-serializer.js\'s', async () => {
    const expectedOrder = ['sync', 'tick 1', 'work', 'tick 2', 'tick 3'];
    assert.deepEqual(await idleKeyOrder(createKeyedSerializer), expectedOrder);
    if (process.env.KEYTURN_SEED) {
      const seed = createRequire(import.meta.url)(process.env.KEYTURN_SEED).createKeyedSerializer;
      assert.deepEqual(await idleKeyOrder(seed), expectedOrder, 'the seed itself');
    }
  });
});
