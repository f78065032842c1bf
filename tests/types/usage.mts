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

// @ts-expect-error the key is a string
serialize(5, () => 1);
// @ts-expect-error work is a function
serialize('key', 5);
// @ts-expect-error timeoutMs is a number
createKeyedSerializer({ timeoutMs: '5' });
// @ts-expect-error onLateSettle is a function
serialize('key', () => 1, { onLateSettle: true });

import { acquireLock, LOCK_STALE_MS, LOCK_WAIT_MS, LockStoreError, MemoryStore, type Lock, type LockStore } from 'keyturn';

async function locks(): Promise<void> {
  const store: LockStore = new MemoryStore();
  const lock: Lock | undefined = await acquireLock(store, 'board:1', { waitMs: LOCK_WAIT_MS, staleMs: LOCK_STALE_MS, now: Date.now });
  if (lock) {
    const fence: number = lock.fence;
    const token: string = lock.token;
    void [fence, token, lock.name];
    await lock.release();
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
}
void locks;
