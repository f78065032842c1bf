// Fault injection at every host call the package makes: `setTimeout` refusing a timer (as
// workerd does past 10 000 active timeouts in a request), an `AbortController` that cannot be
// made, `queueMicrotask` throwing, a store method throwing synchronously — and a trap inside the
// wasm instance itself. Every call settles, the one that met the fault rejects with an Error,
// nothing is an unhandled rejection, and the same serializer, a new one and the lock keep
// working. In both modes (see ../modes.mjs).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { assertFence, deferred } from '../support.mjs';
// The package's modules as one graph: the bindings patched here are the ones its modes use.
import { forEachMode, LockEngine, SerializerEngine } from '../modes.mjs';

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

/** Replaces `globalThis[name]` with a version that throws on the given calls (1-based), and returns a restore function. */
function failOn(name, calls, make = (real) => real) {
  const real = globalThis[name];
  let count = 0;
  const fault = new Error(`injected: ${name} call refused`);
  const wrapped = make(real, () => {
    count += 1;
    if (calls.includes(count)) throw fault;
  });
  globalThis[name] = wrapped;
  return { fault, restore: () => (globalThis[name] = real), count: () => count };
}

const callThrough = (real, check) =>
  function (...args) {
    check();
    return real.apply(this, args);
  };

const constructThrough = (Real, check) =>
  new Proxy(Real, {
    construct(target, args, newTarget) {
      check();
      return Reflect.construct(target, args, newTarget);
    },
  });

/** Serializes 60 works over 3 keys, each with its own, decreasing deadline (so each start arms a timer in either mode); returns their outcomes. */
async function sixtyWorks(serialize) {
  const ran = [];
  const calls = [];
  for (let i = 0; i < 60; i++) {
    calls.push(
      serialize(`k${i % 3}`, async () => {
        ran.push(i);
        await null;
        return i;
      }, { timeoutMs: 10_000 - i }),
    );
  }
  const outcomes = await Promise.allSettled(calls);
  return { ran, outcomes };
}

forEachMode(({ name, acquireLock, createKeyedSerializer, KeyturnInstanceFailed, MemoryStore, SerializedWorkTimeout }) => {
  /** The package still works: the same serializer, a new one, and the lock. */
  async function stillWorks(serialize) {
    assert.deepEqual(await Promise.all([serialize('after', async () => 1), serialize('after', () => 2)]), [1, 2]);
    const fresh = createKeyedSerializer({ timeoutMs: 20 });
    assert.equal(await fresh('x', async () => 'fresh'), 'fresh');
    await assert.rejects(fresh('x', () => new Promise(() => {})), SerializedWorkTimeout);
    const store = new MemoryStore();
    const lock = await acquireLock(store, 'after-a-fault');
    assert.ok(lock);
    await lock.release();
    assert.equal(serialize.pending(), 0);
    assert.equal(fresh.pending(), 0);
  }

  for (const nth of [1, 2, 7]) {
    test(`setTimeout throwing on call ${nth}: that work does not run and gets the host's error; the rest runs`, async () => {
      const serialize = createKeyedSerializer();
      const injected = failOn('setTimeout', [nth], callThrough);
      let result;
      try {
        result = await sixtyWorks(serialize);
      } finally {
        injected.restore();
      }
      const failed = result.outcomes.flatMap((outcome, i) => (outcome.status === 'rejected' ? [[i, outcome.reason]] : []));
      assert.equal(failed.length, 1, `one call failed: ${failed.map(([i, e]) => `${i}: ${e}`)}`);
      assert.equal(failed[0][1], injected.fault);
      assert.equal(result.ran.length, 59);
      assert.ok(!result.ran.includes(failed[0][0]), 'the refused work never ran');
      for (const [i, outcome] of result.outcomes.entries()) if (outcome.status === 'fulfilled') assert.equal(outcome.value, i);
      // Per key, the works that ran kept their order.
      for (const k of [0, 1, 2]) {
        const ranOfKey = result.ran.filter((i) => i % 3 === k);
        assert.deepEqual(ranOfKey, [...ranOfKey].sort((a, b) => a - b));
      }
      await stillWorks(serialize);
      await sleep(5);
      assert.deepEqual(unhandled, []);
    });
  }

  test('an AbortController that cannot be made once: that work fails with the error, the rest runs', async () => {
    const serialize = createKeyedSerializer();
    const injected = failOn('AbortController', [3], constructThrough);
    let result;
    try {
      result = await sixtyWorks(serialize);
    } finally {
      injected.restore();
    }
    const failed = result.outcomes.filter((outcome) => outcome.status === 'rejected');
    assert.equal(failed.length, 1);
    assert.equal(failed[0].reason, injected.fault);
    assert.equal(result.ran.length, 59);
    await stillWorks(serialize);
    await sleep(5);
    assert.deepEqual(unhandled, []);
  });

  test('queueMicrotask throwing: every work still runs, in order', async () => {
    const serialize = createKeyedSerializer();
    const injected = failOn('queueMicrotask', [1, 2, 3, 4, 5], callThrough);
    let result;
    try {
      result = await sixtyWorks(serialize);
    } finally {
      injected.restore();
    }
    assert.deepEqual(result.outcomes.map((outcome) => outcome.status === 'fulfilled' && outcome.value), Array.from({ length: 60 }, (_, i) => i));
    await stillWorks(serialize);
    await sleep(5);
    assert.deepEqual(unhandled, []);
  });

  test('a timer refused on the shared timer\'s re-arm gives up on the earliest work with the host\'s error', async () => {
    // Deadlines 300 ms in and 300 ms apart: the fault is in place long before the first fires,
    // and that one fires before the second is due, however late a busy machine runs them.
    const serialize = createKeyedSerializer({ timeoutMs: 300 });
    const hung = [serialize('a', () => new Promise(() => {})), serialize('b', () => new Promise(() => {}), { timeoutMs: 600 })];
    await sleep(2);
    // The next setTimeout: the re-arm after the first deadline (direct mode); in workers mode,
    // where each work armed its own already, the re-arm of one that fired early (Node arms a
    // timer from a clock it cached, and the engine is told the real time), if any.
    const injected = failOn('setTimeout', [1], callThrough);
    let outcomes;
    try {
      outcomes = await Promise.allSettled(hung);
    } finally {
      injected.restore();
    }
    const reasons = outcomes.map((outcome) => outcome.reason);
    if (name === 'workers') {
      assert.ok(reasons.filter((reason) => reason === injected.fault).length <= 1, String(reasons));
      assert.ok(reasons.every((reason) => reason === injected.fault || reason instanceof SerializedWorkTimeout), String(reasons));
    } else {
      // The re-arm that fails is the one after the first firing: b's deadline — or a's own,
      // when the timer fired a little early. The work it was for gets the host's error; the
      // other times out.
      assert.equal(reasons.filter((reason) => reason === injected.fault).length, 1, String(reasons));
      assert.equal(reasons.filter((reason) => reason instanceof SerializedWorkTimeout).length, 1, String(reasons));
    }
    await stillWorks(serialize);
  });

  test('a store method that throws synchronously: that acquisition rejects, the lock keeps working', async () => {
    const store = new MemoryStore();
    let throwNext = true;
    const faulty = {
      create(key, value) {
        if (throwNext) {
          throwNext = false;
          throw new Error('store down');
        }
        return store.create(key, value);
      },
      read: (key) => store.read(key),
      replace: (key, version, value) => store.replace(key, version, value),
    };
    const outcomes = await Promise.allSettled([acquireLock(faulty, 'n'), acquireLock(faulty, 'n', { waitMs: 1000 })]);
    assert.equal(outcomes[0].status, 'rejected');
    assert.equal(outcomes[0].reason.name, 'LockStoreError');
    assert.equal(outcomes[1].status, 'fulfilled');
    await outcomes[1].value.release();
    await stillWorks(createKeyedSerializer());
    await sleep(5);
    assert.deepEqual(unhandled, []);
  });

  // With one timer for all, a waiter whose timer is refused is given up on. With a timer per
  // call (Workers), a waiter in line here needs none of its own — the timers of the calls ahead
  // serve it (one request at workerd's 10 000 timers has others to fire) — and keeps its place.
  test('the lock: a refused timer for a waiter fails that acquisition, or (a timer per call) leaves it in line; a `now` that throws fails only that acquisition; the line moves on', async () => {
    const store = new MemoryStore();
    // A still clock, so that fences rise by one.
    const still = () => 1_000_000;
    const holder = await acquireLock(store, 'timers', { now: still });
    // The next waiter arms a timer (and nothing else does): refused.
    const refused = failOn('setTimeout', [1], callThrough);
    let waiting;
    try {
      waiting = acquireLock(store, 'timers', { waitMs: 5000, now: still });
      if (name === 'workers') {
        await sleep(5);
        await holder.release();
        const served = await waiting;
        assert.ok(served.fence > holder.fence, 'the waiter kept its place and was served');
        await served.release();
      } else {
        await assert.rejects(waiting, (error) => error === refused.fault);
      }
    } finally {
      refused.restore();
    }
    assert.ok(refused.count() >= 1, 'a timer was refused');
    const behind = acquireLock(store, 'timers', { waitMs: 5000, now: still });
    await holder.release();
    const next = await behind;
    // (Its ask may have been in the record already: the lease handed on to it was given back.)
    assert.ok(next.fence > holder.fence, 'the refused waiter left the line and holds nothing');
    await next.release();

    const broken = new Error('clock down');
    let fail = false;
    const now = () => {
      if (fail) {
        fail = false;
        throw broken;
      }
      return Date.now();
    };
    const first = await acquireLock(store, 'clock', { now });
    fail = true;
    const second = acquireLock(store, 'clock', { now, waitMs: 5000 });
    await assert.rejects(second, (error) => error === broken);
    await first.release();
    const third = await acquireLock(store, 'clock', { now, waitMs: 0 });
    assert.ok(third, 'nothing left queued');
    await third.release();
    assert.deepEqual(unhandled, []);
  });

  test('a trap in the wasm instance: a clear error for that call and every later one, a fresh instance for new serializers', async () => {
    const serialize = createKeyedSerializer();
    const other = createKeyedSerializer();
    const gate = deferred();
    const running = serialize('k', () => gate.promise.then(() => 'finished anyway'));
    const waitingElsewhere = [other('busy', () => gate.promise), other('busy', () => 'never runs')];
    await sleep(1);
    // Corrupt the next engine call's pointer, as a memory fault would: the wasm traps.
    const original = SerializerEngine.prototype.enter;
    SerializerEngine.prototype.enter = function (...args) {
      SerializerEngine.prototype.enter = original;
      this.__wbg_ptr = 0xfffffff0;
      return original.apply(this, args);
    };
    const failing = serialize('k', () => 'never');
    const error = await failing.then(() => assert.fail('resolved'), (e) => e);
    assert.ok(error instanceof KeyturnInstanceFailed, String(error));
    assert.equal(error.name, 'KeyturnInstanceFailed');
    assert.match(error.message, /^keyturn's wasm instance failed \(.+\)/);
    assert.ok(error.cause instanceof WebAssembly.RuntimeError);
    // Later calls, on this serializer and on others of the same instance, fail with the same error.
    assert.equal(await serialize('k2', () => 1).catch((e) => e), error);
    assert.equal(await other('x', () => 1).catch((e) => e), error);
    assert.throws(() => serialize.pending(), (e) => e === error);
    // What waited in the failed instance is told; what ran finishes.
    assert.equal(await waitingElsewhere[1].catch((e) => e), error);
    gate.resolve();
    assert.equal(await running, 'finished anyway');
    assert.equal(await waitingElsewhere[0], undefined);
    // A serializer made now gets a fresh instance.
    const fresh = createKeyedSerializer({ timeoutMs: 20 });
    assert.deepEqual(await Promise.all([fresh('k', async () => 'a'), fresh('k', () => 'b')]), ['a', 'b']);
    await assert.rejects(fresh('k', () => new Promise(() => {})), SerializedWorkTimeout);
    assert.equal(fresh.pending(), 0);
    await sleep(5);
    assert.deepEqual(unhandled, []);
  });

  test('a trap in the lock\'s wasm instance: that call, its waiters and its locks fail clearly; new acquisitions get a fresh instance', async () => {
    const store = new MemoryStore();
    const holder = await acquireLock(store, 'a');
    const waiting = acquireLock(store, 'a', { waitMs: 5000 });
    await sleep(1);
    // Corrupt the next engine call's pointer, as a memory fault would: the wasm traps.
    const original = LockEngine.prototype.acquire;
    LockEngine.prototype.acquire = function (...args) {
      LockEngine.prototype.acquire = original;
      this.__wbg_ptr = 0xfffffff0;
      return original.apply(this, args);
    };
    const trapped = await acquireLock(store, 'b').catch((error) => error);
    assert.ok(trapped instanceof KeyturnInstanceFailed, String(trapped));
    assert.ok(trapped.cause instanceof WebAssembly.RuntimeError);
    assert.equal(await waiting.catch((error) => error), trapped, 'the waiter in it is told, with the same error');
    assert.equal(await holder.renew().catch((error) => error), trapped);
    await assert.rejects(holder.release(), (error) => error === trapped);
    // The same store, a fresh instance: a new name is taken at once.
    const from = Date.now();
    const fresh = await acquireLock(store, 'c');
    assertFence(fresh.fence, 0, from, Date.now());
    await fresh.release();
    assert.deepEqual(unhandled, []);
  });
});
