// A name taken N at a time (`concurrency`): the lock as a semaphore and the serializer over a
// store, across two package instances over one store (the ESM entry and the CommonJS one, as two
// isolates would be) and across two processes over a redis-server — each held to a history: never
// more than N holders at once, never two in one slot, fences rising per slot.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import { createClient } from 'redis';
import * as a from 'keyturn';

import { countingStore } from './counting-store.mjs';
import { checkHistory, semaphoreLoops } from './semaphore-loops.mjs';
import { keyturnProcess } from '../runtimes/redis-keyturn-processes.mjs';
import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';

const b = createRequire(import.meta.url)('keyturn');


/**
 * The slots both instances hold once what the waits that lost took meanwhile is released — in
 * the background, after the winner was answered — or after `ms`.
 */
async function heldOnceSettled(store, ms = 1000) {
  const held = () => a.lockStats(store).held + b.lockStats(store).held;
  for (const until = performance.now() + ms; held() > 0 && performance.now() < until; ) await sleep(2);
  return held();
}

test('an idle name taken N at a time costs what a mutex costs: one create, one release, slot 0', async () => {
  const store = countingStore(true);
  const lock = await a.acquireLock(store, 'idle', { concurrency: 5 });
  assert.equal(lock.slot, 0);
  assert.equal(lock.name, 'idle');
  await lock.release();
  assert.equal(store.calls, 2);
  const record = JSON.parse((await store.read('idle')).value);
  assert.equal(record.n, 5, 'its record says its concurrency');
});

test('N holders at once, each in a slot of its own; the next waits and takes the first slot freed', async () => {
  const store = new a.MemoryStore();
  const held = [];
  for (let i = 0; i < 3; i++) held.push(await a.acquireLock(store, 'three', { concurrency: 3 }));
  assert.deepEqual(held.map((lock) => lock.slot).sort(), [0, 1, 2]);
  assert.equal(a.lockStats(store).held, 3, 'lockStats counts slots');
  assert.equal(await a.acquireLock(store, 'three', { concurrency: 3, waitMs: 20 }), undefined);
  const waiting = b.acquireLock(store, 'three', { concurrency: 3, waitMs: 2000 });
  await sleep(10);
  const before = held[1].fence;
  await held[1].release();
  const next = await waiting;
  assert.equal(next.slot, held[1].slot, 'the slot freed');
  assert.ok(next.fence > before, 'its fence is above the slot\'s last');
  for (const lock of [held[0], held[2], next]) await lock.release();
  assert.equal(a.lockStats(store).held, 0);
});

test('a name keeps one concurrency: another is refused with ConcurrencyMismatch, before any write', async () => {
  const store = countingStore(false);
  const lock = await a.acquireLock(store, 'kept', { concurrency: 3 });
  // In line here: refused at once.
  await assert.rejects(a.acquireLock(store, 'kept', { concurrency: 2 }), (error) => {
    assert.ok(error instanceof a.ConcurrencyMismatch);
    assert.equal(error.name, 'ConcurrencyMismatch');
    assert.deepEqual([error.lockName, error.concurrency, error.found], ['kept', 2, 3]);
    assert.match(error.message, /lock kept is taken 3 at a time .* asked for 2 at a time/);
    return true;
  });
  await lock.release();
  // Another instance, from the record.
  const calls = store.calls;
  await assert.rejects(b.acquireLock(store, 'kept'), { name: 'ConcurrencyMismatch' });
  await assert.rejects(b.withLock(store, 'kept', () => {}, { concurrency: 4 }), { name: 'ConcurrencyMismatch' });
  assert.ok(!(await store.read('kept')).value.includes('"held"'), 'nothing written: the record is free');
  assert.ok(store.calls - calls <= 5, 'creates and reads only');
  // A mutex's record refuses a semaphore of its name, here and elsewhere.
  await (await a.acquireLock(store, 'mutex')).release();
  await assert.rejects(a.acquireLock(store, 'mutex', { concurrency: 2 }), { name: 'ConcurrencyMismatch', found: 1 });
  await assert.rejects(b.acquireLock(store, 'mutex', { concurrency: 2 }), { name: 'ConcurrencyMismatch', found: 1 });
  // And the serializer over the store: its work does not run.
  const serialize = b.createKeyedSerializer({ store, concurrency: 2 });
  await (await a.acquireLock(store, `${a.SERIALIZE_PREFIX}k`)).release();
  let ran = false;
  await assert.rejects(serialize('k', () => (ran = true)), { name: 'ConcurrencyMismatch' });
  assert.equal(ran, false);
});

test('concurrency is checked: a whole number from 1 to 1024', async () => {
  const store = new a.MemoryStore();
  for (const bad of [0, -1, 1.5, 1025, NaN, Infinity]) {
    await assert.rejects(a.acquireLock(store, 'x', { concurrency: bad }), {
      name: 'RangeError',
      message: `keyturn: options.concurrency must be a whole number from 1 to 1024, got ${bad}`,
    });
  }
  await assert.rejects(a.acquireLock(store, 'x', { concurrency: '2' }), { name: 'TypeError' });
  assert.equal(a.lockStats(store).storeCalls, 0);
  const lock = await a.acquireLock(store, 'x', { concurrency: 1024 });
  assert.equal(lock.slot, 0);
  await lock.release();
});

test('a waiter for every slot aborted, or out of time, leaves nothing held and nobody in line', async () => {
  const store = new a.MemoryStore();
  const held = [await a.acquireLock(store, 's', { concurrency: 2 }), await b.acquireLock(store, 's', { concurrency: 2 })];
  const controller = new AbortController();
  const aborted = a.acquireLock(store, 's', { concurrency: 2, waitMs: 5000, signal: controller.signal });
  const timedOut = a.acquireLock(store, 's', { concurrency: 2, waitMs: 30 });
  await sleep(10);
  controller.abort(new Error('gone'));
  await assert.rejects(aborted, /gone/);
  assert.equal(await timedOut, undefined);
  for (const lock of held) await lock.release();
  await sleep(5);
  assert.equal(a.lockStats(store).held, 0);
  assert.equal(a.lockStats(store).waiting, 0);
  // Both slots free again: two holders at once.
  const again = [await a.acquireLock(store, 's', { concurrency: 2 }), await a.acquireLock(store, 's', { concurrency: 2 })];
  assert.deepEqual(again.map((lock) => lock.slot).sort(), [0, 1]);
  for (const lock of again) await lock.release();
});

for (const tells of [true, false]) {
  const how = tells ? 'woken by changed' : 'polling';
  test(`two instances over one MemoryStore (${how}): 2 × 6 holders of a name at concurrency 3, from their history`, async () => {
    const store = countingStore(tells);
    const events = [];
    const record = (event) => events.push(event);
    const options = { name: 'sem', n: 3, holders: 6, turns: 25, holdMs: 4 };
    const taken = await Promise.all([
      semaphoreLoops(a.withLock, store, record, { ...options, who: 'a' }),
      semaphoreLoops(b.withLock, store, record, { ...options, who: 'b' }),
    ]);
    const { most, turns, perSlot } = checkHistory(events, 3);
    assert.equal(turns, 300);
    assert.deepEqual(taken, [150, 150]);
    assert.equal(most, 3, 'all three slots were used at once');
    assert.ok(perSlot.every((count) => count > 0), `every slot served: ${perSlot}`);
    assert.equal(await heldOnceSettled(store), 0);
  });
}

test('a serializer over one MemoryStore at concurrency 3 in two instances: never more than 3 works of a key at once, fences rising per slot', async () => {
  const store = new a.MemoryStore();
  const events = [];
  const serializers = [a.createKeyedSerializer({ store, concurrency: 3 }), b.createKeyedSerializer({ store, concurrency: 3 })];
  const works = [];
  for (let i = 0; i < 200; i++) {
    const who = i % 2 === 0 ? 'a' : 'b';
    works.push(
      serializers[i % 2]('k', async (_signal, turn) => {
        events.push({ who, kind: 'in', slot: turn.slot, fence: turn.fence });
        if (Math.random() < 0.7) await sleep(Math.random() * 3);
        events.push({ who, kind: 'out', slot: turn.slot, fence: turn.fence });
      }),
    );
  }
  await Promise.all(works);
  const { most, turns } = checkHistory(events, 3);
  assert.equal(turns, 200);
  assert.equal(most, 3);
  assert.equal(await heldOnceSettled(store), 0, 'every slot freed once the key is idle');
});

describe('two processes over redis-server', { skip: !haveRedisServer() && 'no redis-server' }, () => {
  let server;
  let client;
  const processes = [];
  before(async () => {
    server = await startRedisServer();
    client = await createClient({ url: `redis://127.0.0.1:${server.port}` }).connect();
  });
  after(async () => {
    for (const process of processes) process.stop();
    await client?.quit().catch(() => {});
    server?.stop();
  });

  for (const tells of [true, false]) {
    test(`a name at concurrency 3, 2 × 5 holders (${tells ? 'subscribe' : 'polling'}): the server's list of their turns`, async () => {
      const prefix = `sem${tells}:`;
      const log = `${prefix}history`;
      const other = keyturnProcess({ port: server.port, prefix, tells });
      processes.push(other);
      const options = { name: 'sem', n: 3, holders: 5, turns: 20, holdMs: 5 };
      const options2 = {};
      if (tells) {
        const subscriber = await client.duplicate().connect();
        options2.subscribe = async (channel, onMessage) => {
          await subscriber.subscribe(channel, onMessage);
          return () => subscriber.unsubscribe(channel, onMessage).then(() => subscriber.quit());
        };
      }
      const store = new a.RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }), { prefix, ...options2 });
      const record = (event) => client.rPush(log, JSON.stringify(event));
      const [there, here] = await Promise.all([
        other.send({ op: 'semaphore', log, ...options, who: 'there' }),
        semaphoreLoops(a.withLock, store, record, { ...options, who: 'here' }),
      ]);
      assert.deepEqual([there.turns, here], [100, 100]);
      const events = (await client.lRange(log, 0, -1)).map((line) => JSON.parse(line));
      const { most, turns } = checkHistory(events, 3);
      assert.equal(turns, 200);
      assert.equal(most, 3);
      other.stop();
    });
  }
});

test('the history checker finds each broken promise', () => {
  const turn = (who, slot, fence) => [
    { who, kind: 'in', slot, fence },
    { who, kind: 'out', slot, fence },
  ];
  const [in1, out1] = turn('a', 0, 1);
  const [in2, out2] = turn('b', 1, 5);
  const [in3, out3] = turn('c', 0, 2);
  assert.deepEqual(checkHistory([in1, in2, out1, in3, out2, out3], 2), { most: 2, turns: 3, perSlot: [2, 1] });
  // A slot counted twice: two holders of slot 0 at once.
  assert.throws(() => checkHistory([in1, in3, out1, out3], 2), /slot 0 held by a:1 already/);
  // More holders than N.
  assert.throws(() => checkHistory([in1, in2], 1), /slot out of range/);
  assert.throws(() => checkHistory([in1, ...turn('b', 1, 1).slice(0, 1)], 2).most, /never left/);
  // A fence that does not rise in its slot.
  assert.throws(() => checkHistory([in3, out3, in1, out1], 2), /fence not above 2/);
  assert.throws(() => checkHistory([in1, out2], 2), /leaves slot 1/);
});

test('an abort in any microtask of an acquisition leaves nothing held (a lock answered just before it is let go)', async () => {
  const store = new a.MemoryStore();
  let got = 0;
  for (let i = 0; i < 400; i++) {
    const controller = new AbortController();
    const acquisition = a.acquireLock(store, 'raced', { signal: controller.signal, concurrency: 1 + (i % 2) });
    // Abort after 0 to 39 microtasks: somewhere in the acquisition, or just after it was answered.
    let hops = i % 40;
    const abort = () => (hops-- > 0 ? Promise.resolve().then(abort) : controller.abort(new Error('gone')));
    abort();
    const lock = await acquisition.catch(() => undefined);
    if (lock !== undefined) {
      got += 1;
      await lock.release();
    }
  }
  assert.ok(got > 0 && got < 400, `${got} of 400 answered before their abort`);
  assert.equal(await heldOnceSettled(store), 0);
});
