// Type-checked (tsc --noEmit) against pkg/index.d.ts by `make test`: every export has types,
// and misuse is a type error.
import { createKeyedSerializer, DEFAULT_TIMEOUT_MS, SerializedWorkTimeout, type Serialize } from 'keyturn';

const serialize: Serialize = createKeyedSerializer({ timeoutMs: DEFAULT_TIMEOUT_MS });
const n: Promise<number> = serialize('key', async (signal: AbortSignal) => (signal.aborted ? 0 : 1));
const s: Promise<string> = serialize('key', () => 'sync', { onLateSettle: (value: unknown) => void value });
const pending: number = serialize.pending();

async function handle(): Promise<void> {
  try {
    await n;
    await s;
  } catch (error) {
    if (error instanceof SerializedWorkTimeout) {
      const key: string = error.key;
      const ms: number = error.timeoutMs;
      const name: 'SerializedWorkTimeout' = error.name;
      void [key, ms, name];
    }
  }
}
void [handle, pending];

import { KeyturnInstanceFailed, SerializedQueueFull, type SerializerStats, type Turn } from 'keyturn';

const bounded = createKeyedSerializer({ timeoutMs: 1000, maxPending: 8 });
async function controls(request: { signal: AbortSignal }): Promise<void> {
  try {
    const fence: number = await bounded('order-1', async (signal: AbortSignal, turn: Turn) => (signal.aborted ? -1 : turn.fence), {
      signal: request.signal,
      timeoutMs: 250,
    });
    void fence;
  } catch (error) {
    if (error instanceof SerializedQueueFull) {
      const max: number = error.maxPending;
      const name: 'SerializedQueueFull' = error.name;
      void [max, name, error.key];
    }
    if (error instanceof KeyturnInstanceFailed) void error.cause;
  }
  const depth: number = bounded.pending('order-1');
  const stats: SerializerStats = bounded.stats();
  const counters: number[] = [stats.keys, stats.running, stats.waiting, stats.started, stats.timedOut, stats.aborted, stats.refused, stats.lateSettled, stats.coalesced];
  void [depth, counters];
}
void controls;

// Every optional option takes `undefined` too, under exactOptionalPropertyTypes: a signal a
// handler may or may not have, say.
async function maybeSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): Promise<number> {
  const own = createKeyedSerializer({ timeoutMs, maxPending: undefined, store: undefined, staleMs: undefined });
  return own('key', () => 1, { signal, timeoutMs, onLateSettle: undefined });
}
void maybeSignal;

// @ts-expect-error maxPending is a number
createKeyedSerializer({ maxPending: '8' });
// @ts-expect-error signal is an AbortSignal
bounded('key', () => 1, { signal: true });
// @ts-expect-error timeoutMs is a number
bounded('key', () => 1, { timeoutMs: '5' });

// @ts-expect-error the key is a string
serialize(5, () => 1);
// @ts-expect-error work is a function
serialize('key', 5);
// @ts-expect-error timeoutMs is a number
createKeyedSerializer({ timeoutMs: '5' });
// @ts-expect-error onLateSettle is a function
serialize('key', () => 1, { onLateSettle: true });
const shared: Promise<number> = serialize('key', async () => 1, { coalesce: true });
void serialize('key', async () => 1, { coalesce: 'acl', timeoutMs: 500 });
// @ts-expect-error coalesce is true, false or a group's name
serialize('key', () => 1, { coalesce: 1 });
void shared;

import { acquireLock, withLock, lockStats, LOCK_STALE_MS, LOCK_WAIT_MS, LockStoreError, LockUnavailable, MemoryStore, type Lock, type LockStats, type LockStore } from 'keyturn';

async function locks(): Promise<void> {
  const store: LockStore = new MemoryStore();
  const lock: Lock | undefined = await acquireLock(store, 'board:1', { waitMs: LOCK_WAIT_MS, staleMs: LOCK_STALE_MS, now: Date.now });
  if (lock) {
    const fence: number = lock.fence;
    const token: string = lock.token;
    const until: number = lock.heldUntil;
    const lost: AbortSignal = lock.signal;
    const renewed: boolean = await lock.renew();
    void [fence, token, lock.name, until, lost, renewed];
    await lock.release();
  }
  const controller = new AbortController();
  await acquireLock(store, 'board:1', { signal: controller.signal });
  const total: number = await withLock(store, 'board:1', async (held) => held.fence + 1, { waitMs: 10, staleMs: 90 });
  const text: string = await withLock(store, 'board:1', () => 'sync value');
  void [total, text];
  try {
    await withLock(store, 'x', () => 1);
  } catch (error) {
    if (error instanceof LockUnavailable) void [error.key, error.waitMs satisfies number];
  }
  try {
    await acquireLock({ create: async () => null, read: async () => null, replace: async () => null }, 'x');
  } catch (error) {
    if (error instanceof LockStoreError) void error.cause;
  }
  // @ts-expect-error a store has three methods
  await acquireLock({ create: async () => null }, 'x');
  // @ts-expect-error waitMs is a number
  await acquireLock(store, 'x', { waitMs: '5' });
  // @ts-expect-error fn is a function
  await withLock(store, 'x', 5);
  // @ts-expect-error signal is an AbortSignal
  await acquireLock(store, 'x', { signal: true });
  const skewed = await acquireLock(store, 'x', { maxClockSkewMs: 5000, storeTimeoutMs: undefined });
  // @ts-expect-error storeTimeoutMs is a number
  await acquireLock(store, 'x', { storeTimeoutMs: '5' });
  const counters: LockStats = lockStats(store);
  const calls: number = counters.storeCalls + counters.storeTimeouts + counters.readBacksApplied + counters.takeovers;
  // @ts-expect-error lockStats takes a store
  lockStats('store');
  void [skewed, calls];
}
void locks;

import { SERIALIZE_PREFIX } from 'keyturn';

async function acrossIsolates(): Promise<void> {
  const store: LockStore = new MemoryStore();
  const shared: Serialize = createKeyedSerializer({ store, staleMs: 3000, timeoutMs: 10_000, maxPending: 100 });
  const written: number = await shared('order-1', async (signal, turn) => {
    const fence: number = turn.fence;
    void signal.aborted;
    return fence;
  });
  const name: string = `${SERIALIZE_PREFIX}order-1`;
  void [written, name];
  // @ts-expect-error a store has three methods
  createKeyedSerializer({ store: { create: async () => null } });
  // @ts-expect-error staleMs is a number
  createKeyedSerializer({ store, staleMs: '5' });
}
void acrossIsolates;
