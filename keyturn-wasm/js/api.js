// What every entry exports besides the two primitives it makes for its platform
// (`createKeyedSerializer`, and `acquireLock`/`withLock`: see the entries). Static JS, copied
// into pkg/ by the build.
export { DEFAULT_TIMEOUT_MS, LOCK_STALE_MS, LOCK_WAIT_MS, SERIALIZE_PREFIX } from './constants.js';
export { ConcurrencyMismatch, KeyturnInstanceFailed, LockStoreError, LockUnavailable, SerializedQueueFull, SerializedWorkTimeout, SerializedWorkUnavailable } from './errors.js';
export { MemoryStore } from './stores/memory.js';
export { R2Store } from './stores/r2.js';
export { RedisStore } from './stores/redis.js';
export { PostgresStore } from './stores/postgres.js';
export { DurableObjectStore } from './stores/durable-object-store.js';
export { DenoKvStore } from './stores/deno-kv.js';
export { SqliteStore } from './stores/sqlite.js';
export { DynamoDbStore } from './stores/dynamodb.js';
