// One lock store per isolate, made once from `env`: every request of this isolate shares its
// manager, so contenders for one name queue here and the lock is handed from one to the next —
// only the head of the line talks to the Durable Object. (A store made per request would give
// each request a manager of its own: its contenders would poll the store with backoff.)
import { DurableObjectStore } from 'keyturn';

const stores = new WeakMap();

/** The isolate's store over the `LOCKS` namespace (keyed by the binding, which `env` carries). */
export function lockStore(env) {
  let store = stores.get(env.LOCKS);
  if (store === undefined) {
    store = new DurableObjectStore(env.LOCKS);
    stores.set(env.LOCKS, store);
  }
  return store;
}

export function lockOptions(env) {
  return {
    waitMs: Number(env.CLAIM_WAIT_MS ?? 10000),
    staleMs: Number(env.LOCK_STALE_MS ?? 2000),
  };
}
