// createKeyedSerializer({ store }): the serializer's guarantee across isolates, against pkg/, in
// both modes (see ../modes.mjs). The package's modules and its CommonJS entry are independent
// wasm instances, each with its own lock manager: two "isolates" sharing one store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import { MapStore, record } from '../map-store.mjs';
import { onMockedTime, seededRandom, watchProcess } from '../support.mjs';
import { forEachMode } from '../modes.mjs';

const require = createRequire(import.meta.url);
const cjs = require('keyturn');
const watch = watchProcess();

forEachMode((mode) => {
  /** Two serializers in two instances over one shared Map of records. */
  function twoIsolates(options = {}, storeOptions = {}) {
    const records = new Map();
    const stores = [new MapStore({ records, ...storeOptions }), new MapStore({ records, ...storeOptions })];
    const serializers = [mode.createKeyedSerializer({ ...options, store: stores[0] }), cjs.createKeyedSerializer({ ...options, store: stores[1] })];
    return { records, stores, serializers };
  }

  /** Watches works for overlaps and fences. */
  function monitor() {
    const state = { live: 0, maxLive: 0, fences: [], overlaps: 0 };
    state.enter = (turn) => {
      state.live += 1;
      if (state.live > 1) state.overlaps += 1;
      state.maxLive = Math.max(state.maxLive, state.live);
      state.fences.push(turn.fence);
    };
    state.leave = () => {
      state.live -= 1;
    };
    return state;
  }

  const rising = (fences) => fences.every((fence, i) => i === 0 || fence > fences[i - 1]);

  test('200 read-modify-write increments split across two instances: total 200, one at a time, fences rising', async () => {
    const { serializers } = twoIsolates({ staleMs: 500 }, { lagMs: 2 });
    const watched = monitor();
    let total = 0;
    const increment = async (signal, turn) => {
      watched.enter(turn);
      const read = total;
      await sleep(0);
      total = read + 1;
      watched.leave();
      return turn.fence;
    };
    const calls = [];
    for (let i = 0; i < 200; i++) calls.push(serializers[i % 2]('counter', increment));
    const fences = await Promise.all(calls);
    assert.equal(total, 200);
    assert.equal(watched.maxLive, 1, 'never two works at once');
    assert.ok(rising(watched.fences), 'fences strictly rise in the order works ran');
    assert.equal(new Set(fences).size, 200);
    assert.ok(fences.every((fence) => fence >= 1));
    for (const serialize of serializers) assert.equal(serialize.pending(), 0);
    await watch.noUnhandled();
  });

  test('keyed-serializer.js\'s microtask order holds with a store: a caller\'s handlers run before the next work', async () => {
    const serialize = mode.createKeyedSerializer({ store: new mode.MemoryStore() });
    const log = [];
    const first = serialize('k', async () => {
      log.push('work 1');
      return 1;
    });
    first.then(() => log.push('handler 1'));
    const second = serialize('k', () => {
      log.push('work 2');
      throw new Error('no');
    });
    second.catch(() => log.push('handler 2'));
    const third = serialize('k', () => log.push('work 3'));
    await third;
    await sleep(0);
    assert.deepEqual(log, ['work 1', 'handler 1', 'work 2', 'handler 2', 'work 3']);
  });

  // The next two are about a deadline plus a poll's pause, and renewals every 20 ms: on mocked
  // time (../support.mjs), where the package's timers move only as the test says.
  test('a hung work in one instance times out, and the other\'s work runs within that deadline plus a poll', () => onMockedTime(async (clock) => {
    const { serializers } = twoIsolates({ timeoutMs: 150, staleMs: 5000 });
    const started = clock.now();
    const hung = serializers[0]('k', () => new Promise(() => {}));
    await clock.advance(10);
    let ranAt;
    const other = serializers[1]('k', (signal, turn) => {
      ranAt = clock.now() - started;
      return turn.fence;
    }, { timeoutMs: 1000 });
    await assert.rejects(clock.settle(hung), (error) => error.name === 'SerializedWorkTimeout' && error.timeoutMs === 150);
    const fence = await clock.settle(other);
    assert.ok(ranAt >= 140 && ranAt < 150 + 60, `ran at ${ranAt.toFixed(1)} ms`);
    assert.ok(fence >= 2);
  }));

  test('a work running 3 × staleMs keeps its lease (renewed) and is not overlapped', () => onMockedTime(async (clock) => {
    const { serializers, stores } = twoIsolates({ staleMs: 60, timeoutMs: 2000 });
    const watched = monitor();
    let signalOfLong;
    const long = serializers[0]('k', async (signal, turn) => {
      signalOfLong = signal;
      watched.enter(turn);
      await clock.sleep(180);
      watched.leave();
      return 'long';
    });
    await clock.advance(5);
    const calls = stores[0].calls;
    const short = serializers[1]('k', (signal, turn) => {
      watched.enter(turn);
      watched.leave();
      return 'short';
    });
    assert.deepEqual(await clock.settle(Promise.all([long, short])), ['long', 'short']);
    assert.equal(watched.maxLive, 1);
    assert.equal(signalOfLong.aborted, false);
    assert.ok(stores[0].calls - calls >= 4, `renewed: ${stores[0].calls - calls} calls`);
    assert.ok(rising(watched.fences));
  }));

  test('a lease lost anyway (a renewal refused) aborts the work\'s signal', async () => {
    const store = new MapStore();
    const serialize = mode.createKeyedSerializer({ store, staleMs: 60 });
    const result = serialize('k', async (signal) => {
      // Somebody else wrote the record (an operator, a takeover by a far-off clock).
      const name = `${mode.SERIALIZE_PREFIX}k`;
      const mine = store.records.get(name);
      const theirs = { ...JSON.parse(mine.value), token: 'f'.repeat(32) };
      store.records.set(name, { value: JSON.stringify(theirs), version: 'theirs' });
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      return signal.reason;
    });
    const reason = await result;
    assert.equal(reason.name, 'AbortError');
    assert.match(reason.message, /lease of key k was lost/);
  });

  test('a failing store rejects that work with LockStoreError, the key moves on, nothing is left held', async () => {
    const store = new MapStore();
    const serialize = mode.createKeyedSerializer({ store });
    const create = store.create.bind(store);
    let failures = 1;
    store.create = async (key, value) => {
      if (failures-- > 0) throw new Error('injected failure');
      return create(key, value);
    };
    let ran = false;
    const failing = serialize('k', () => {
      ran = true;
    });
    const next = serialize('k', (signal, turn) => turn.fence);
    await assert.rejects(failing, (error) => error instanceof mode.LockStoreError && /injected failure/.test(error.message));
    assert.ok((await next) >= 1);
    assert.equal(ran, false, 'the work whose lease could not be had never ran');
    assert.equal(serialize.pending('k'), 0);
    await sleep(5);
    assert.equal(record(store, 'keyturn:serialize:k').state, 'free');
  });

  test('consecutive works in one isolate hand the lease on: 16 works cost at most 0.2 store calls each', async () => {
    const store = new MapStore();
    const serialize = mode.createKeyedSerializer({ store });
    const fences = await Promise.all(Array.from({ length: 16 }, () => serialize('k', async (signal, turn) => turn.fence)));
    await sleep(5);
    assert.ok(rising(fences), fences.join(' '));
    assert.ok(store.calls / 16 <= 0.2, `${store.calls} store calls for 16 works`);
    assert.equal(record(store, 'keyturn:serialize:k').state, 'free');
  });

  test('a waiting work whose deadline passes while another isolate holds the lease never runs, and holds nothing', async () => {
    const { serializers, records } = twoIsolates({ staleMs: 5000 });
    let release;
    const holder = serializers[0]('k', () => new Promise((resolve) => (release = resolve)), { timeoutMs: 1000 });
    await sleep(5);
    let ran = false;
    const late = serializers[1]('k', () => {
      ran = true;
    }, { timeoutMs: 50 });
    await assert.rejects(late, { name: 'SerializedWorkTimeout' });
    release('done');
    assert.equal(await holder, 'done');
    await sleep(40);
    assert.equal(ran, false);
    assert.equal(JSON.parse(records.get('keyturn:serialize:k').value).state, 'free');
  });

  test('stats(): a work that timed out waiting for its lease counts as timed out, not started', async () => {
    const { serializers } = twoIsolates({ staleMs: 5000 });
    let release;
    const holder = serializers[1]('k', () => new Promise((resolve) => (release = resolve)), { timeoutMs: 1000 });
    await sleep(5);
    await assert.rejects(serializers[0]('k', () => 'never', { timeoutMs: 50 }), { name: 'SerializedWorkTimeout' });
    release();
    await holder;
    const stats = serializers[0].stats();
    assert.deepEqual([stats.started, stats.timedOut, stats.running, stats.keys], [0, 1, 0, 0]);
    assert.equal(await serializers[0]('k', () => 'ran'), 'ran');
    assert.equal(serializers[0].stats().started, 1);
    assert.equal(serializers[1].stats().started, 1);
  });

  test('the caller\'s signal cancels a work waiting for the lease, leaving nothing held', async () => {
    const { serializers, records } = twoIsolates();
    let release;
    const holder = serializers[0]('k', () => new Promise((resolve) => (release = resolve)));
    await sleep(5);
    const controller = new AbortController();
    const waiting = serializers[1]('k', () => 'never', { signal: controller.signal });
    await sleep(10);
    controller.abort(new Error('client left'));
    await assert.rejects(waiting, /client left/);
    release();
    await holder;
    await sleep(10);
    assert.equal(JSON.parse(records.get('keyturn:serialize:k').value).state, 'free');
  });

  test('without a store nothing changes: turn.fence is 0', async () => {
    const serialize = mode.createKeyedSerializer();
    assert.equal(await serialize('k', (signal, turn) => turn.fence), 0);
  });

  test('bad input: a store missing a method, a Workers KV namespace, a bad staleMs', () => {
    assert.throws(() => mode.createKeyedSerializer({ store: { create() {}, read() {} } }), (error) => error instanceof TypeError && /store\.replace/.test(error.message));
    const kv = { get() {}, put() {}, delete() {}, list() {}, getWithMetadata() {} };
    assert.throws(() => mode.createKeyedSerializer({ store: kv }), (error) => error instanceof TypeError && /Workers KV/.test(error.message));
    assert.throws(() => mode.createKeyedSerializer({ store: new mode.MemoryStore(), staleMs: 0 }), (error) => error instanceof RangeError && /staleMs/.test(error.message));
    assert.throws(() => mode.createKeyedSerializer({ store: new mode.MemoryStore(), staleMs: '5' }), (error) => error instanceof TypeError && /staleMs/.test(error.message));
    assert.throws(() => mode.createKeyedSerializer({ store: null }), TypeError);
  });

  test('a key\'s lock name is SERIALIZE_PREFIX + key, and an application may take that turn itself', async () => {
    assert.equal(mode.SERIALIZE_PREFIX, 'keyturn:serialize:');
    const store = new mode.MemoryStore();
    const serialize = mode.createKeyedSerializer({ store });
    const lock = await mode.acquireLock(store, `${mode.SERIALIZE_PREFIX}${'x'.repeat(512)}`);
    assert.ok(lock, 'a 512-byte key has its lock name');
    let ran = false;
    const work = serialize('x'.repeat(512), () => {
      ran = true;
    });
    await sleep(20);
    assert.equal(ran, false, 'the work waits for the application\'s lock');
    await lock.release();
    await work;
    assert.equal(ran, true);
    await assert.rejects(mode.acquireLock(store, 'x'.repeat(513)), RangeError);
  });

  // On mocked time: leases of 200 ms, deadlines of 5–24 ms and aborts within 30 ms play out as
  // the seed says, not as a busy machine's late timers would have them.
  test('randomized: two instances, random deadlines, aborts and store lag — no overlap except after an abandonment, every promise settles', () => onMockedTime(async (clock) => {
    const random = seededRandom(20261201);
    const { serializers, stores } = twoIsolates({ staleMs: 200, maxPending: 40 }, { lagMs: 3, random });
    let live = 0;
    let overlaps = 0;
    let abandoned = 0;
    const fences = [];
    const calls = [];
    for (let i = 0; i < 300; i++) {
      const serialize = serializers[Math.floor(random() * 2)];
      const key = `k${Math.floor(random() * 3)}`;
      const controller = random() < 0.1 ? new AbortController() : undefined;
      const timeoutMs = random() < 0.1 ? 5 + Math.floor(random() * 20) : 2000;
      const workMs = Math.floor(random() * 4);
      const call = serialize(key, async (signal, turn) => {
        if (key === 'k0') {
          live += 1;
          if (live > 1 && abandoned === 0) overlaps += 1;
          fences.push(turn.fence);
        }
        try {
          await clock.sleep(workMs);
        } finally {
          if (key === 'k0') live -= 1;
        }
        return turn.fence;
      }, { timeoutMs, signal: controller?.signal });
      if (controller !== undefined) setTimeout(() => controller.abort(new Error('gave up')), Math.floor(random() * 30));
      calls.push(
        call.then(
          () => 'ok',
          (error) => {
            if (key === 'k0') abandoned += 1;
            return error.name ?? error.message;
          },
        ),
      );
      if (random() < 0.2) await clock.advance(Math.floor(random() * 5));
    }
    const outcomes = await clock.settle(Promise.all(calls));
    assert.equal(outcomes.length, 300, 'every promise settled');
    assert.equal(overlaps, 0);
    assert.ok(rising(fences), 'fences rise in the order works started');
    await clock.advance(20);
    for (const key of ['k0', 'k1', 'k2']) {
      const held = stores[0].records.get(`keyturn:serialize:${key}`);
      if (held !== undefined) assert.equal(JSON.parse(held.value).state, 'free', `${key} is left free`);
    }
    assert.ok(outcomes.filter((o) => o === 'ok').length > 150, outcomes.join(','));
    for (const serialize of serializers) assert.equal(serialize.pending(), 0);
    assert.ok(stores[0].calls + stores[1].calls > 0);
    await watch.noUnhandled();
  }));

  test('the last work of a key frees its lease before its caller hears: nothing is left held when a handler answers', async () => {
    const store = new MapStore({ lagMs: 3 });
    const serialize = mode.createKeyedSerializer({ store });
    for (let round = 0; round < 3; round++) {
      const fence = await serialize('k', async (signal, turn) => turn.fence);
      assert.equal(record(store, 'keyturn:serialize:k').state, 'free', `round ${round}: freed before the caller resumed`);
      assert.equal(record(store, 'keyturn:serialize:k').fence, fence);
    }
    // With works behind, the lease is handed on instead: the first turn's CAS, one hand-off CAS
    // reserving a fence for the third, and the last release.
    const calls = store.calls;
    await Promise.all([serialize('k', () => 1), serialize('k', () => 2), serialize('k', () => 3)]);
    assert.equal(record(store, 'keyturn:serialize:k').state, 'free');
    assert.equal(store.calls - calls, 3, `${store.calls - calls} calls for three works`);
  });
});
