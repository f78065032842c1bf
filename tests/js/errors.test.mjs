// The usual mistakes, each refused with an error that says the fix, asserted with its message:
// option names no entry point knows (the closest known one named), a Workers KV namespace where
// a store or a bucket is expected, a Durable Object stub where the namespace is. The same with
// real bindings in workerd: tests/js/workerd.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { acquireLock, createKeyedSerializer, DenoKvStore, DurableObjectStore, MemoryStore, R2Store, RedisStore, withLock } from 'keyturn';

const refusal = (name, message) => (error) => {
  assert.equal(error.name, name);
  assert.equal(error.message, message);
  return true;
};

const unknown = (what, name, closest, also = '') => refusal('TypeError', `keyturn: ${what} has no option ${name}: did you mean ${closest}?${also}`);
// A serializer's refusal also lists its options: with a store it takes only three of the lock's.
const SERIALIZER_LISTED = " A serializer takes timeoutMs, maxPending, concurrency, rate, store and scope; with a store also three of the lock's options: staleMs, maxClockSkewMs and storeTimeoutMs (its wait for a key's lease is within timeoutMs).";
const unknownToSerializer = (name, closest) => unknown('options', name, closest, SERIALIZER_LISTED);

test('an option name nobody knows is refused, naming the closest known one', async () => {
  assert.throws(() => createKeyedSerializer({ timeout: 1000 }), unknownToSerializer('timeout', 'timeoutMs'));
  assert.throws(() => createKeyedSerializer({ maxpending: 3 }), unknownToSerializer('maxpending', 'maxPending'));
  assert.throws(() => createKeyedSerializer({ store: new MemoryStore(), stale: 500 }), unknownToSerializer('stale', 'staleMs'));
  const serialize = createKeyedSerializer();
  await assert.rejects(serialize('k', () => 1, { signl: AbortSignal.timeout(10) }), unknown('options', 'signl', 'signal'));
  await assert.rejects(serialize('k', () => 1, { onLateSettled: () => {} }), unknown('options', 'onLateSettled', 'onLateSettle'));
  assert.equal(serialize.pending(), 0, 'nothing queued');
  const store = new MemoryStore();
  await assert.rejects(acquireLock(store, 'n', { wait: 5 }), unknown('options', 'wait', 'waitMs'));
  await assert.rejects(withLock(store, 'n', () => 1, { staleMS: 5 }), unknown('options', 'staleMS', 'staleMs'));
  assert.throws(() => new RedisStore(async () => 1, { evalSha: async () => 1 }), unknown('options', 'evalSha', 'evalShaFn'));
  const bucket = { get: async () => null, put: async () => null, head: async () => null };
  assert.throws(() => new R2Store(bucket, { prefx: 'x/' }), unknown('options', 'prefx', 'prefix'));
  const namespace = { idFromName: () => ({}), get: () => ({}) };
  assert.throws(() => new DurableObjectStore(namespace, { Prefix: 'x' }), unknown('options', 'Prefix', 'prefix'));
  const kv = { get: async () => ({ value: null, versionstamp: null }), atomic: () => ({}) };
  assert.throws(() => new DenoKvStore(kv, { perfix: ['x'] }), unknown('options', 'perfix', 'prefix'));
  // Every optional option also takes undefined.
  assert.equal(await createKeyedSerializer({ timeoutMs: undefined })('k', () => 'ok', { signal: undefined, timeoutMs: undefined }), 'ok');
  assert.ok(new R2Store(bucket, { prefix: undefined }));
});

test('a hint names the option that means what a word of another library means, not the nearest spelling', async () => {
  const store = new MemoryStore();
  // Without a store a serializer's only time is each work's deadline.
  for (const name of ['ttl', 'timeout', 'lease', 'ttlMs', 'deadline', 'waitMs']) {
    assert.throws(() => createKeyedSerializer({ [name]: 1000 }), unknownToSerializer(name, 'timeoutMs'), name);
  }
  // With a store, a ttl or a lease is the lease a turn holds; its wait for the lease is within its deadline.
  for (const [name, meant] of [['ttl', 'staleMs'], ['lease', 'staleMs'], ['leaseMs', 'staleMs'], ['timeout', 'timeoutMs'], ['waitMs', 'timeoutMs'], ['wait', 'timeoutMs']]) {
    assert.throws(() => createKeyedSerializer({ store, [name]: 1000 }), unknownToSerializer(name, meant), name);
  }
  // A lock's timeout is how long it waits for the name (not one store call's bound); its ttl, the lease.
  for (const [name, meant] of [['timeoutMs', 'waitMs'], ['timeout', 'waitMs'], ['acquireTimeout', 'waitMs'], ['ttl', 'staleMs'], ['lease', 'staleMs'], ['ttlMs', 'staleMs'], ['lease_ms', 'staleMs']]) {
    await assert.rejects(acquireLock(store, 'n', { [name]: 50 }), unknown('options', name, meant), name);
    await assert.rejects(withLock(store, 'n', () => 1, { [name]: 50 }), unknown('options', name, meant), name);
  }
  const serialize = createKeyedSerializer();
  for (const [name, meant] of [['timeout', 'timeoutMs'], ['ttl', 'timeoutMs'], ['deadline', 'timeoutMs'], ['tryLock', 'ifAvailable']]) {
    await assert.rejects(serialize('k', () => 1, { [name]: true }), unknown('options', name, meant), name);
  }
  assert.throws(() => createKeyedSerializer({ rate: { limit: 1, window: 100 } }), unknown('options.rate', 'window', 'periodMs'));
  assert.equal(serialize.pending(), 0, 'nothing queued');
  assert.equal((await acquireLock(store, 'n')) !== undefined, true, 'nothing was left held');
});

test('a Workers KV namespace where a store or an R2 bucket is expected is refused, saying what to use', async () => {
  const kv = { get: async () => null, put: async () => {}, delete: async () => {}, list: async () => ({ keys: [] }), getWithMetadata: async () => ({ value: null }) };
  const noConditionalPut = 'is a Workers KV namespace, which has no conditional put and is eventually consistent: a lock over it would let two holders in at once. Use a store with a conditional put: a Durable Object, R2, Redis or Deno KV.';
  assert.throws(() => new R2Store(kv), refusal('TypeError', `keyturn: bucket ${noConditionalPut}`));
  await assert.rejects(acquireLock(kv, 'n'), refusal('TypeError', `keyturn: store ${noConditionalPut}`));
  assert.throws(() => createKeyedSerializer({ store: kv }), refusal('TypeError', `keyturn: options.store ${noConditionalPut}`));
});

test('a Durable Object stub where its namespace is expected is refused', () => {
  const stub = { id: { equals: () => false, toString: () => 'id' }, name: 'some-lock', idFromName: () => {}, get: () => {} };
  assert.throws(
    () => new DurableObjectStore(stub),
    refusal('TypeError', 'keyturn: namespace is a Durable Object stub, not a namespace: pass the binding itself (env.LOCKS), and the store routes each lock name to its own object'),
  );
});

test('a store missing a method, and arguments of the wrong type, are named with what they must be', async () => {
  await assert.rejects(acquireLock({ create() {}, read() {} }, 'n'), refusal('TypeError', 'keyturn: store.replace must be a function (a store has create, read and replace)'));
  await assert.rejects(acquireLock(new MemoryStore(), 5), refusal('TypeError', 'keyturn: name must be a non-empty string, got number'));
  await assert.rejects(createKeyedSerializer()('k', 'work'), refusal('TypeError', 'keyturn: work must be a function, got string'));
  await assert.rejects(createKeyedSerializer()('', () => 1), refusal('TypeError', 'keyturn: key must be a non-empty string, got ""'));
  await assert.rejects(createKeyedSerializer()('k', () => 1, { signal: {} }), refusal('TypeError', 'keyturn: options.signal must be an AbortSignal or undefined, got object'));
  assert.throws(() => createKeyedSerializer({ timeoutMs: 0 }), refusal('RangeError', 'keyturn: options.timeoutMs must be a finite number from 1 to 2147483647, got 0'));
  await assert.rejects(acquireLock(new MemoryStore(), 'n', { waitMs: -1 }), refusal('RangeError', 'keyturn: options.waitMs must be a finite number of milliseconds from 0 to 2147483647, got -1'));
});
