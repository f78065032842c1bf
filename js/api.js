// The package's JavaScript surface. Static JS, copied into pkg/ by the build; every entry (node,
// workerd, browser) initialises the wasm, then re-exports this file.
export { createKeyedSerializer, DEFAULT_TIMEOUT_MS, SERIALIZE_PREFIX, SerializedWorkTimeout, SerializedQueueFull } from './serializer.js';
export { KeyturnInstanceFailed } from './errors.js';
export { acquireLock, withLock, LOCK_STALE_MS, LOCK_WAIT_MS, LockStoreError, LockUnavailable, MemoryStore } from './lock.js';
export { R2Store } from './stores/r2.js';
export { RedisStore } from './stores/redis.js';
export { DurableObjectStore } from './stores/durable-object-store.js';
export { DenoKvStore } from './stores/deno-kv.js';
