// Types of the keyturn package. Static, copied into pkg/ by the build.

/** The default deadline of one serialized work: 30 000 ms, as the seed. */
export const DEFAULT_TIMEOUT_MS: number;

/**
 * A serialized work did not settle within its deadline: the caller's promise rejects with this,
 * the work's signal is aborted, and the next work for the key starts.
 */
export class SerializedWorkTimeout extends Error {
  constructor(key: string, timeoutMs: number);
  readonly name: 'SerializedWorkTimeout';
  /** The key the work ran under. */
  readonly key: string;
  /** The deadline it had, in milliseconds. */
  readonly timeoutMs: number;
}

export interface SerializeOptions {
  /**
   * Called once when a work that timed out settles after all, with what it resolved
   * (`undefined` when it rejected); what it throws is ignored. Never called for a work that
   * settled in time, nor for one that never settles.
   */
  onLateSettle?: (value: unknown) => void;
}

export interface Serialize {
  /**
   * Runs `work(signal)` once every work queued earlier for `key` has settled or timed out, and
   * settles as `work` does — or rejects with a {@link SerializedWorkTimeout} (aborting `signal`)
   * when `work` has not settled within the serializer's `timeoutMs`.
   *
   * Rejects with a `TypeError` when `key` is not a non-empty, well-formed string, `work` is not
   * a function or an option has the wrong type, and with a `RangeError` when `key` is over 512
   * UTF-8 bytes; a rejected call queues nothing.
   */
  <T>(
    key: string,
    work: (signal: AbortSignal) => T | PromiseLike<T>,
    options?: SerializeOptions,
  ): Promise<Awaited<T>>;
  /** The number of keys with queued or running work; 0 once all work has settled. */
  pending(): number;
}

export interface KeyedSerializerOptions {
  /** Deadline of each work in milliseconds, a finite number from 1 to 2^31 - 1; default 30 000. */
  timeoutMs?: number;
}

/**
 * A per-key serializer: works for one key never overlap and start in the order they entered
 * `serialize`; works for different keys run concurrently. Within one isolate only.
 *
 * Throws a `TypeError` when `options` or `options.timeoutMs` has the wrong type and a
 * `RangeError` when `timeoutMs` is out of range.
 */
export function createKeyedSerializer(options?: KeyedSerializerOptions): Serialize;

/** How long one acquisition waits for a live holder before answering nothing: 100 ms, as the seed. */
export const LOCK_WAIT_MS: number;

/** The age past which a held lock record is abandoned and taken over: 2000 ms, as the seed. */
export const LOCK_STALE_MS: number;

/**
 * The pluggable storage a lock runs over: any object with these three methods, each one atomic
 * store operation. An error thrown or rejected by one is a store failure, never a busy lock.
 */
export interface LockStore {
  /** Writes `value` under `key` only if no record exists: the new version, or null if one exists. */
  create(key: string, value: string): Promise<string | null>;
  /** The record under `key`, or null. */
  read(key: string): Promise<{ value: string; version: string } | null>;
  /** Writes `value` only if the record's version is still `version` (CAS): the new version, or null. */
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/** The embedded store: records in this isolate's memory, with exact create-if-absent and CAS. */
export class MemoryStore implements LockStore {
  constructor();
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/** A lock store failed; the store's own error is `cause`. */
export class LockStoreError extends Error {
  readonly name: 'LockStoreError';
}

export interface LockOptions {
  /** How long to wait for a live holder, in ms (≥ 0; 0 tries once). Default 100. */
  waitMs?: number;
  /** The age past which a held record is abandoned and taken over, in ms (> 0). Default 2000. */
  staleMs?: number;
  /** The clock, in epoch milliseconds (record times are compared across isolates). Default `Date.now`. */
  now?: () => number;
}

/** A held lock. */
export interface Lock {
  readonly name: string;
  /** The token in the lock record while this lock is held: 128 random bits, hex. Acquisitions handed on within one local batch share it; `fence` is unique to each. */
  readonly token: string;
  /** Strictly greater than every earlier acquisition's fence for this name, across releases and takeovers. */
  readonly fence: number;
  /** Frees the record if it still carries this token (a late release after a takeover changes nothing); twice is harmless. A lock never released is taken over once its record is stale (`staleMs`), by other isolates and by the waiters in this one. */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Takes the lock `name` in `store`, or resolves to `undefined` when a live holder kept it for the
 * whole `waitMs`. Contenders in one isolate queue first come, first served, and a release hands
 * the lock to the next of them directly (one store call per batch of hand-offs). Rejects with a `LockStoreError` when the store fails and
 * a `TypeError`/`RangeError` for a bad store, name or option; a Workers KV namespace is refused
 * (it has no conditional put).
 */
export function acquireLock(store: LockStore, name: string, options?: LockOptions): Promise<Lock | undefined>;

/**
 * An R2 bucket as a lock store: create by `onlyIf: { etagDoesNotMatch: '*' }`, CAS by
 * `onlyIf: { etagMatches }`. Records live under `prefix` (default `keyturn-lock/`).
 */
export class R2Store implements LockStore {
  constructor(bucket: { get(key: string): Promise<unknown>; put(key: string, value: string, options?: unknown): Promise<unknown> }, options?: { prefix?: string });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/**
 * Redis as a lock store over any client: `evalFn(script, keys, args)` runs a Lua script and
 * resolves to its reply (nil → null). Each record is one string (version, then value) under
 * `prefix` (default `keyturn-lock:`).
 */
export class RedisStore implements LockStore {
  constructor(evalFn: (script: string, keys: string[], args: string[]) => Promise<unknown>, options?: { prefix?: string });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/**
 * Durable Objects as a lock store: each lock name is routed to its own `LockDurableObject`
 * (`idFromName(prefix + name)`) over RPC. `prefix` defaults to `keyturn-lock:`.
 */
export class DurableObjectStore implements LockStore {
  constructor(namespace: { idFromName(name: string): unknown; get(id: unknown): unknown }, options?: { prefix?: string });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/**
 * The Durable Object class that holds lock records in SQLite storage (workerd entry only).
 * Bind it in wrangler.toml (`new_sqlite_classes = ["LockDurableObject"]`) and export it from
 * the worker: `export { LockDurableObject } from 'keyturn'`.
 */
export class LockDurableObject {
  constructor(ctx: unknown, env: unknown);
  create(key: string, value: string): string | null;
  read(key: string): { value: string; version: string } | null;
  replace(key: string, version: string, value: string): string | null;
}

/**
 * Deno KV as a lock store: `atomic().check({ key, versionstamp })` for create and CAS. Records
 * live under the key prefix (default `['keyturn-lock']`).
 */
export class DenoKvStore implements LockStore {
  constructor(kv: { get(key: unknown[]): Promise<{ value: unknown; versionstamp: string | null }>; atomic(): unknown }, options?: { prefix?: unknown[] });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}
