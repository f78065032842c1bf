// Tracing through node:diagnostics_channel (keyturn-wasm/js/tracing.js, docs/tracing.md): a
// subscriber sees each event with its fields — a turn's wait, start and end (without a store,
// and over a MemoryStore with its store calls), a lock's acquisition, release and loss (taken
// over, lapsed), a store call that failed — and with no subscriber nothing is published. Times
// are on the mocked clock, so each `waitedMs` and `heldMs` is exact. The docs' OpenTelemetry
// example runs as written, under a recording tracer provider.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import diagnostics from 'node:diagnostics_channel';

import { MemoryStore, SerializedWorkTimeout, acquireLock, createKeyedSerializer, withLock } from 'keyturn';

import { onMockedTime } from './support.mjs';

/** A second package instance (the CommonJS entry, its own wasm instance): another isolate. */
const other = createRequire(import.meta.url)('keyturn');

const CHANNELS = ['keyturn:turn:wait', 'keyturn:turn:start', 'keyturn:turn:end', 'keyturn:lock:acquire', 'keyturn:lock:release', 'keyturn:lock:lost', 'keyturn:store'];

/** Subscribes to every channel while `body(seen)` runs: `seen` lists [channel, message]. */
async function recording(body) {
  const seen = [];
  const subscribers = CHANNELS.map((name) => [name, (message) => seen.push([name.slice('keyturn:'.length), message])]);
  for (const [name, subscriber] of subscribers) diagnostics.subscribe(name, subscriber);
  try {
    return await body(seen);
  } finally {
    for (const [name, subscriber] of subscribers) diagnostics.unsubscribe(name, subscriber);
  }
}

const of = (seen, channel) => seen.filter(([name]) => name === channel).map(([, message]) => message);

test('a turn waits, starts and ends: key, slot, fence, waited and held ms, and how it ended', () =>
  onMockedTime((clock) =>
    recording(async (seen) => {
      const serialize = createKeyedSerializer({ timeoutMs: 1000 });
      const failure = new Error('no courier');
      const first = serialize('order-1', () => clock.sleep(30).then(() => 'paid'));
      const second = serialize('order-1', () => clock.sleep(20).then(() => Promise.reject(failure)));
      const late = serialize('order-1', () => clock.sleep(5000), { timeoutMs: 100 });
      assert.equal(await clock.settle(first), 'paid');
      await assert.rejects(clock.settle(second), (error) => error === failure);
      await assert.rejects(clock.settle(late), SerializedWorkTimeout);

      const waits = of(seen, 'turn:wait');
      assert.deepEqual(waits.map(({ key }) => key), ['order-1', 'order-1', 'order-1']);
      const ids = waits.map(({ id }) => id);
      assert.equal(new Set(ids).size, 3);
      const starts = of(seen, 'turn:start');
      assert.deepEqual(starts.map(({ id, key, slot, fence }) => [id, key, slot, fence]), ids.map((id) => [id, 'order-1', 0, 0]));
      // Each waited for the ones ahead: 0, 30 and 50 ms (the mocked clock has no other time).
      assert.deepEqual(starts.map(({ waitedMs }) => waitedMs), [0, 30, 50]);
      const ends = of(seen, 'turn:end');
      assert.deepEqual(
        ends.map(({ id, slot, fence, waitedMs, heldMs, ok }) => [id, slot, fence, waitedMs, heldMs, ok]),
        [
          [ids[0], 0, 0, 0, 30, true],
          [ids[1], 0, 0, 30, 20, false],
          [ids[2], 0, 0, 50, 100, false],
        ],
      );
      assert.equal(ends[0].error, undefined);
      assert.equal(ends[1].error, failure);
      assert.ok(ends[2].error instanceof SerializedWorkTimeout);
      // Each end before its caller heard, in order.
      assert.deepEqual(seen.filter(([name]) => name === 'turn:end').map(([, { id }]) => id), ids);
    }),
  ));

test('a call that never started ends with no slot, fence or times; one that started before subscribing publishes nothing; unsubscribed, nothing is', () =>
  onMockedTime(async (clock) => {
    const serialize = createKeyedSerializer();
    const before = serialize('k', () => clock.sleep(10));
    await clock.advance(1); // it started: untraced
    const seen = await recording(async (seen) => {
      const controller = new AbortController();
      const cancelled = serialize('k', () => 'never', { signal: controller.signal });
      controller.abort(new Error('gone'));
      await assert.rejects(clock.settle(cancelled), { message: 'gone' });
      await clock.settle(before);
      const ends = of(seen, 'turn:end');
      assert.equal(ends.length, 1, 'only the cancelled call ended traced');
      assert.deepEqual([ends[0].key, ends[0].slot, ends[0].fence, ends[0].waitedMs, ends[0].heldMs, ends[0].ok, ends[0].error.message], ['k', undefined, undefined, undefined, undefined, false, 'gone']);
      assert.equal(of(seen, 'turn:start').length, 0);
      const after = serialize('k', () => clock.sleep(10));
      const behind = serialize('k', () => 1);
      await clock.settle(Promise.all([after, behind]));
      assert.deepEqual(of(seen, 'turn:start').map(({ waitedMs }) => waitedMs), [0, 10]);
      return seen;
    });
    const published = seen.length;
    for (const name of CHANNELS) assert.equal(diagnostics.channel(name).hasSubscribers, false, name);
    assert.equal(await clock.settle(serialize('k', () => 2)), 2);
    assert.equal(seen.length, published);
  }));

test('over a MemoryStore: each turn with its fence, and each store call with its method, key, time and outcome', () =>
  onMockedTime((clock) =>
    recording(async (seen) => {
      const store = new MemoryStore();
      const serialize = createKeyedSerializer({ store, timeoutMs: 1000 });
      const fences = await clock.settle(Promise.all([serialize('doc', async (_, turn) => turn.fence), serialize('doc', async (_, turn) => turn.fence)]));
      const starts = of(seen, 'turn:start');
      assert.deepEqual(starts.map(({ key, fence }) => [key, fence]), fences.map((fence) => ['doc', fence]));
      assert.ok(fences[0] > 0 && fences[1] > fences[0], String(fences));
      assert.deepEqual(of(seen, 'turn:end').map(({ fence, ok }) => [fence, ok]), fences.map((fence) => [fence, true]));
      const calls = of(seen, 'store');
      assert.ok(calls.length >= 2, JSON.stringify(calls));
      assert.deepEqual(calls[0], { method: 'create', key: 'keyturn:serialize:doc', ms: 0, outcome: 'written', error: undefined });
      for (const call of calls) {
        assert.equal(call.key, 'keyturn:serialize:doc');
        assert.ok(['create', 'read', 'replace', 'changed'].includes(call.method), call.method);
        assert.ok(['written', 'refused', 'found', 'missing', 'changed', 'unchanged'].includes(call.outcome), call.outcome);
      }
    }),
  ));

test('a store call that fails, or is refused, says so', () =>
  onMockedTime((clock) =>
    recording(async (seen) => {
      const store = new MemoryStore();
      const broken = {
        create: (key, value) => store.create(key, value),
        read: () => Promise.reject(new Error('down')),
        replace: (key, version, value) => store.replace(key, version, value),
      };
      await clock.settle(store.create('held', JSON.stringify({ keyturn: 1, state: 'held' })));
      const got = acquireLock(broken, 'held', { waitMs: 0 });
      await assert.rejects(clock.settle(got), { name: 'LockStoreError' });
      const [create, read] = of(seen, 'store');
      assert.deepEqual([create.method, create.key, create.outcome], ['create', 'held', 'refused']);
      assert.deepEqual([read.method, read.outcome, read.error.message], ['read', 'failed', 'down']);
    }),
  ));

test('a lock is acquired, released, lost to a takeover and lapses', () =>
  onMockedTime((clock) =>
    recording(async (seen) => {
      const store = new MemoryStore();
      const lock = await clock.settle(acquireLock(store, 'board', { staleMs: 1000 }));
      await clock.advance(40);
      await clock.settle(lock.release());
      const [acquired] = of(seen, 'lock:acquire');
      assert.deepEqual(acquired, { name: 'board', slot: 0, fence: lock.fence, heldUntil: lock.heldUntil, waitedMs: 0, tookOver: false });
      assert.deepEqual(of(seen, 'lock:release'), [{ name: 'board', slot: 0, fence: lock.fence, heldMs: 40 }]);

      // Taken over: the record is another holder's when the lock renews.
      const taken = await clock.settle(acquireLock(store, 'board', { staleMs: 1000 }));
      taken.signal; // watched
      const { version } = await store.read('board');
      await store.replace('board', version, JSON.stringify({ keyturn: 1, state: 'held', token: 'someone-else', fence: taken.fence + 1, at: Date.now(), lease: 1000 }));
      assert.equal(await clock.settle(taken.renew()), false);
      // Lapsed: its lease passed unrenewed.
      const lapsing = await clock.settle(acquireLock(store, 'other', { staleMs: 100 }));
      lapsing.signal;
      await clock.advance(150);
      assert.deepEqual(of(seen, 'lock:lost'), [
        { name: 'board', slot: 0, fence: taken.fence, reason: 'takenOver' },
        { name: 'other', slot: 0, fence: lapsing.fence, reason: 'lapsed' },
      ]);
      // The taker of a stale record — another isolate (the CommonJS instance) — says it took it
      // over.
      seen.length = 0;
      const dead = await clock.settle(acquireLock(store, 'stale', { staleMs: 100 }));
      await clock.advance(150);
      const taker = await clock.settle(other.acquireLock(store, 'stale', { staleMs: 100, waitMs: 1000 }));
      assert.deepEqual(of(seen, 'lock:acquire').map(({ fence, tookOver }) => [fence, tookOver]), [[dead.fence, false], [taker.fence, true]]);
      // withLock's lock: acquired and released.
      seen.length = 0;
      await clock.settle(withLock(store, 'again', async () => clock.sleep(7)));
      assert.deepEqual(of(seen, 'lock:release').map(({ name, heldMs }) => [name, heldMs]), [['again', 7]]);
    }),
  ));

test("the docs' OpenTelemetry example runs as written: a span per turn, the failed one marked", async () => {
  const doc = readFileSync(new URL('../../docs/tracing.md', import.meta.url), 'utf8');
  const code = /```js otel\n([\s\S]*?)```/.exec(doc)[1];
  const expected = /\/\/ (.*)\n$/.exec(code)[1];
  // In the repository, so `keyturn` and `@opentelemetry/api` resolve as a user's would.
  const example = fileURLToPath(new URL('./tracing-example.tmp.mjs', import.meta.url));
  const provider = fileURLToPath(new URL('./tracing-provider.tmp.mjs', import.meta.url));
  writeFileSync(example, code);
  writeFileSync(provider, RECORDING_PROVIDER);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', provider, example]);
    const [printed, spans] = stdout.trim().split('\nSPANS ');
    assert.equal(printed, expected);
    assert.deepEqual(JSON.parse(spans), [
      { name: 'keyturn.turn', attributes: { 'keyturn.key': 'order-1', 'keyturn.slot': 0, 'keyturn.fence': 0 }, status: 0, exceptions: 0, ended: true },
      { name: 'keyturn.turn', attributes: { 'keyturn.key': 'order-1', 'keyturn.slot': 0, 'keyturn.fence': 0 }, status: 2, exceptions: 1, ended: true },
    ]);
  } finally {
    rmSync(example, { force: true });
    rmSync(provider, { force: true });
  }
});

// A tracer provider that records its spans and prints them as the process exits: what an SDK
// would export. (@opentelemetry/api alone makes spans that record nothing.)
const RECORDING_PROVIDER = `
import { trace } from '@opentelemetry/api';
const spans = [];
class Span {
  constructor(name, options) { this.record = { name, attributes: options?.attributes ?? {}, status: 0, exceptions: 0, ended: false }; spans.push(this.record); }
  spanContext() { return { traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 1 }; }
  setAttribute() { return this; } setAttributes() { return this; } addEvent() { return this; } addLink() { return this; } addLinks() { return this; }
  setStatus(status) { this.record.status = status.code; return this; }
  updateName() { return this; } isRecording() { return true; }
  recordException() { this.record.exceptions += 1; }
  end() { this.record.ended = true; }
}
trace.setGlobalTracerProvider({ getTracer: () => ({ startSpan: (name, options) => new Span(name, options), startActiveSpan() { throw new Error('not used'); } }) });
process.on('exit', () => console.log('SPANS ' + JSON.stringify(spans)));
`;
