// Types of the keyturn package. Static, copied into pkg/ by the build.

declare global {
  // `Lock` is `await using`-disposable. Declared here too, so that consumers whose `lib` predates
  // `esnext.disposable` (ES2022, say) compile against these types; it merges with the lib's own.
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol;
  }
}

/** The default deadline of one serialized work: 30 000 ms, as `keyed-serializer.js`. */
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

/**
 * A call found its key with `maxPending` works queued or running already: it rejects with this
 * at once and queues nothing.
 */
export class SerializedQueueFull extends Error {
  constructor(key: string, maxPending: number);
  readonly name: 'SerializedQueueFull';
  /** The key the call was refused for. */
  readonly key: string;
  /** The serializer's bound. */
  readonly maxPending: number;
}

/**
 * A call with `ifAvailable` whose work could not start at once — a work of its key is ahead of
 * it, no slot is free, or the key's `rate` allows no start yet: it rejects with this at once,
 * queues nothing, and its work is never called. What an API answers with 429.
 */
export class SerializedWorkUnavailable extends Error {
  constructor(key: string, retryAfterMs: number | undefined);
  readonly name: 'SerializedWorkUnavailable';
  /** The key the call was refused for. */
  readonly key: string;
  /**
   * How long until the key's pace allows a start, in milliseconds, when the pace is all that
   * held the work up (a `Retry-After`); `undefined` when a work of the key is ahead of it or no
   * slot is free — how long a running work takes is not keyturn's to know.
   */
  readonly retryAfterMs: number | undefined;
}

/**
 * keyturn's wasm instance trapped (a bug, or memory exhausted). The call that met it, and every
 * later call of a serializer or lock made on that instance, rejects with this (`cause` is the
 * trap); works that were waiting in it are rejected with it too. Serializers and locks made
 * afterwards get a fresh instance (Node, browsers, Deno and workerd can make one).
 */
export class KeyturnInstanceFailed extends Error {
  constructor(cause: unknown);
  readonly name: 'KeyturnInstanceFailed';
}

export interface SerializeOptions {
  /**
   * For a work that re-decides from a fresh read: `true`, or a non-empty string naming a group
   * (`true` is a group of its own). Such a call **joins** the key's last queued work when that
   * work was entered with the same `coalesce`, has not started (its deadline is not running:
   * it waits behind another work of the key in this isolate, or was queued on an idle key in
   * the same synchronous run) and has the same deadline length. A joined call's own `work` is
   * never called; it adds nothing to `pending(key)`, is never refused by `maxPending`, and
   * settles as that work does — same value, same error object — with its handlers run before
   * the key's next work. Its `signal` takes only this caller out (the work goes on for the
   * others; a work whose every caller left leaves the line, or is abandoned if it runs), and
   * its `onLateSettle` is heard once if the shared work is abandoned and settles later.
   * Otherwise the call queues as any call does, and later calls of its group may join it.
   * `false` or absent: no coalescing; any other value rejects with a `TypeError`.
   *
   * On Cloudflare Workers the shared work starts from the reaction of a caller still waiting
   * when its turn comes, in that caller's request. If that request ends while the work runs
   * (cancelled by its client), the work's I/O may fail with it: every caller then gets that
   * failure, and the next call re-decides. The caller that queued the work carries its
   * promises in its request: when its `signal` aborts while others still wait, it rejects with
   * the reason once the work ends, not at once.
   */
  coalesce?: boolean | string | undefined;
  /**
   * `true`: run only if the work can start at once — no work of its key is ahead of it, a slot
   * is free and the key's `rate` allows a start. Otherwise the call rejects at once with a
   * {@link SerializedWorkUnavailable} (with `retryAfterMs` where the pace is what held it up),
   * queues nothing, and `work` is never called. Default `false`: wait in line. With a `store`,
   * a slot must be free in every isolate: the call looks once at the key's lease record and is
   * refused (no `retryAfterMs`) if another isolate holds it; the pace is the record's, and a
   * call that took the lease is refused then if the record's starts allow none yet.
   */
  ifAvailable?: boolean | undefined;
  /**
   * Called once when a work that was abandoned — it timed out, or its caller's `signal`
   * aborted while it ran — settles after all, with what it resolved (`undefined` when it
   * rejected); what it throws is ignored. Never called for a work that settled in time, nor
   * for one that never settles.
   */
  onLateSettle?: ((value: unknown) => void) | undefined;
  /**
   * The caller's signal. Already aborted: the call rejects with `signal.reason` at once and
   * queues nothing. Aborted while the work waits: the call rejects with the reason, the work
   * leaves the line at once and never runs. Aborted while it runs: the work's own signal
   * aborts with the same reason, the call rejects with it, and the key moves on (the work is
   * abandoned, as at a timeout). Once the work settled, aborting changes nothing, and no
   * listener stays on the signal.
   */
  signal?: AbortSignal | undefined;
  /** This work's deadline in milliseconds instead of the serializer's: a finite number from 1 to 2^31 - 1. */
  timeoutMs?: number | undefined;
}

/** What a work gets besides its signal. */
export interface Turn {
  /**
   * With a store: the fence of the key's lease for this turn, strictly rising with every turn
   * of the key in every isolate sharing the store — pass it to the writes the work makes, so a
   * resource can refuse a late write of an abandoned turn. At least the acquirer's clock in
   * microseconds when it wrote the lease, so fences stay above every earlier one after the
   * store lost the record (given the clock bound; README, "What the lock promises"). Without a
   * store: 0.
   */
  readonly fence: number;
  /**
   * The key's slot this work runs in: 0 … `concurrency` − 1. No two works of a key running at
   * once share one — with a store, in every isolate sharing it (the slot of the key's lease,
   * whose `fence` rises per slot); without, the lowest free here when it started. Always 0 at
   * `concurrency` 1.
   */
  readonly slot: number;
}

/** Counters since the serializer was made, and what is live now. */
export interface SerializerStats {
  /** Keys with works queued or running now. */
  keys: number;
  /** Works running now (their turn came; neither settled nor abandoned). */
  running: number;
  /** Works waiting for their turn now. */
  waiting: number;
  /**
   * Works whose `work` was called, since creation. With a store a work is called once it holds
   * its key's lease: one that timed out waiting for the lease counts in `timedOut` only.
   */
  started: number;
  /** Works abandoned at their deadline. */
  timedOut: number;
  /** Works cancelled by their caller's signal, waiting or running. */
  aborted: number;
  /** Calls refused by `maxPending`. */
  refused: number;
  /** Abandoned works that settled later. */
  lateSettled: number;
  /** Calls that joined a queued work instead of adding one (`coalesce`). */
  coalesced: number;
  /** Works that waited for their key's `rate` (each counted once). */
  paced: number;
  /** Calls refused by `ifAvailable`. */
  unavailable: number;
}

export interface Serialize {
  /**
   * Runs `work(signal, turn)` once every work queued earlier for `key` has settled, timed out
   * or been cancelled, and settles as `work` does — or rejects with a
   * {@link SerializedWorkTimeout} (aborting `signal`) when `work` has not settled within its
   * deadline, with the caller's `signal.reason` when that aborts, or at once with a
   * {@link SerializedQueueFull} when the key has `maxPending` works. The handlers a caller
   * attaches to the returned promise run before the next work of the key starts.
   *
   * Rejects with a `TypeError` when `key` is not a non-empty, well-formed string, `work` is not
   * a function or an option has the wrong type, and with a `RangeError` when `key` is over 512
   * UTF-8 bytes or `timeoutMs` is out of range; a rejected call queues nothing.
   */
  <T>(
    key: string,
    work: (signal: AbortSignal, turn: Turn) => T | PromiseLike<T>,
    options?: SerializeOptions,
  ): Promise<Awaited<T>>;
  /** The number of keys with queued or running work; 0 once all work has settled. */
  pending(): number;
  /** The works queued or running for `key` (abandoned ones not counted); 0 when it is idle. */
  pending(key: string): number;
  /** Counters since creation, and what is live now. */
  stats(): SerializerStats;
}

export interface KeyedSerializerOptions {
  /** Deadline of each work in milliseconds, a finite number from 1 to 2^31 - 1; default 30 000. */
  timeoutMs?: number | undefined;
  /** Most works one key may have queued or running: a whole number from 1 up, or `Infinity` (the default). */
  maxPending?: number | undefined;
  /**
   * Most works of one key that run at once: a whole number from 1 (the default: one at a time)
   * to 1024. They start in call order, each in a slot of its key (`turn.slot`); deadlines,
   * `maxPending`, signals and coalescing stay per work (a call coalesces only with a work that
   * has not started). With a `store`, at most this many run at once in every isolate sharing
   * it: each turn holds one of the key's slots (see {@link LockOptions.concurrency}).
   */
  concurrency?: number | undefined;
  /**
   * A pace per key: at most `limit` works of a key start in any window of `periodMs` ms (a
   * window sliding over start times, so no burst at a window's edge lets `2 × limit`
   * through). A work waits for its pace in line, as for its turn: works start in call order,
   * once a slot is free (`concurrency`) and the pace allows; its `signal` takes it out,
   * `maxPending` bounds the line, coalescing calls join a work that has not started, and its
   * deadline runs from its start. A key's recent starts outlive its busy spell: a key called
   * again within the period waits as if it had stayed busy. `limit` is a whole number from 1
   * to 1000 and `periodMs` a finite number from 1 to 2^31 - 1 (`RangeError` otherwise); a
   * `rate` that is not such an object is a `TypeError`. Without a store, in this isolate, on its
   * monotonic clock. With a `store`, at `concurrency` 1, in every isolate sharing the store: the
   * key's last starts travel in its lease record (no store call beyond the turns'), so the window
   * holds up to the isolates' clock skew; a record the store lost, or a holder that died between
   * writes, may let one window's worth through again. Above `concurrency` 1 the starts go in a
   * record of their own (`keyturn:pace:` + key): one store call per start, and a work starts up
   * to one store round trip after the time its record carries.
   */
  rate?: { limit: number; periodMs: number } | undefined;
  /**
   * Serialize across every isolate whose serializer uses the same storage: each turn holds the
   * key's lease in this store (the lock named `SERIALIZE_PREFIX + key`), renewed while its work
   * runs. The deadline covers waiting for the lease and running. A store failure rejects that
   * work with {@link LockStoreError}. A Workers KV namespace is refused (no conditional put).
   */
  store?: LockStore | undefined;
  /** With a store: the lease a running turn holds, in ms, renewed every third of it; default 2000. */
  staleMs?: number | undefined;
  /** With a store: how far apart isolates' clocks may be, in ms (see {@link LockOptions.maxClockSkewMs}); default 0. */
  maxClockSkewMs?: number | undefined;
  /** With a store: the bound on one store call, in ms (see {@link LockOptions.storeTimeoutMs}); default `staleMs`. */
  storeTimeoutMs?: number | undefined;
  /**
   * `'isolate'`: this serializer orders each key within its own isolate, and that is what is
   * meant. Without a store, the order holds in one isolate only; a Cloudflare Worker runs in
   * many, so on the `workerd` entry a serializer made with neither a `store` nor this option
   * logs one warning (`console.warn`) at its first call. It changes nothing else, and other
   * hosts never warn (one process is one isolate). `'isolate'` is the only value (any other is
   * a `RangeError`); with a `store` it is a `TypeError`.
   */
  scope?: 'isolate' | undefined;
}

/** A serializer with a store serves key `k` under the lock name `SERIALIZE_PREFIX + k`: `'keyturn:serialize:'`. */
export const SERIALIZE_PREFIX: string;

/**
 * A per-key serializer: works for one key never overlap (at most `concurrency` run at once)
 * and start in the order they entered `serialize`; works for different keys run concurrently. Within one isolate — or, with a
 * `store`, across every isolate sharing it (in order within each isolate).
 *
 * Throws a `TypeError` when `options` or one of its fields has the wrong type (or `store` is
 * not a lock store) and a `RangeError` when `timeoutMs`, `maxPending`, `concurrency`, `rate`,
 * `staleMs`, `maxClockSkewMs` or `storeTimeoutMs` is out of range.
 */
export function createKeyedSerializer(options?: KeyedSerializerOptions): Serialize;

/** How long one acquisition waits for a live holder before answering nothing: 100 ms, as `board-lock.ts`. */
export const LOCK_WAIT_MS: number;

/** The age past which a held lock record is abandoned and taken over: 2000 ms, as `board-lock.ts`. */
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
  /**
   * Optional: resolves to `true` once the record under `key` no longer has `version` (null:
   * once it exists), `false` after `ms` (it may resolve `true` spuriously). With it, the head of
   * a name's line waits for the holder in another isolate to let go instead of polling.
   */
  changed?: ((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined;
}

/** The embedded store: records in this isolate's memory, with exact create-if-absent and CAS. */
export class MemoryStore implements LockStore {
  constructor();
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
  changed(key: string, version: string | null, ms: number): Promise<boolean>;
}

/** A lock store failed; the store's own error is `cause`. */
export class LockStoreError extends Error {
  readonly name: 'LockStoreError';
}

/**
 * A lock name (or a serializer's key over a store) was acquired with another `concurrency` than
 * its records carry, or than its holders and waiters in this isolate have: nothing was written,
 * nothing is held. A name keeps one concurrency.
 */
export class ConcurrencyMismatch extends Error {
  constructor(lockName: string, concurrency: number, found: number);
  readonly name: 'ConcurrencyMismatch';
  /** The lock's name. */
  readonly lockName: string;
  /** What the acquisition asked. */
  readonly concurrency: number;
  /** What the name's records (or acquisitions here) say. */
  readonly found: number;
}

/** A live holder kept the lock's name for the whole wait of `withLock`. */
export class LockUnavailable extends Error {
  constructor(key: string, waitMs: number);
  readonly name: 'LockUnavailable';
  /** The lock's name. */
  readonly key: string;
  /** How long it waited, in ms. */
  readonly waitMs: number;
}

export interface LockOptions {
  /** How long to wait for a live holder, in ms (≥ 0; 0 tries once). Default 100. */
  waitMs?: number | undefined;
  /**
   * The lease this holder promises itself, in ms (> 0): its record carries it, and a record not
   * renewed for this long (or for a taker's own `staleMs`, if longer) is abandoned and taken
   * over. Default 2000.
   */
  staleMs?: number | undefined;
  /**
   * How far apart isolates' clocks may be, in ms (0 to 2^31 - 1): a held record is taken over by
   * its age only once older than its lease plus this, by the taker's `now`. Whatever the clocks
   * say, a record this isolate watched stay unchanged for its lease (on `performance.now()`) is
   * taken over. Default 0: clocks agree.
   */
  maxClockSkewMs?: number | undefined;
  /**
   * The bound on one store call, in ms (1 to 2^31 - 1): a call not answered by then has failed
   * with a `LockStoreError`, its outcome unknown (a write is read back). Default `staleMs`.
   */
  storeTimeoutMs?: number | undefined;
  /**
   * How many holders the name has at once, in every isolate sharing the store: a whole number
   * from 1 (the default: a mutex) to 1024. Each holder has one of its slots (`lock.slot`), each
   * slot a record of its own with its own fences, lease, renewals and waiters' order. Every
   * acquisition of a name must give the same: one whose records (or holders here) say another
   * rejects with {@link ConcurrencyMismatch}. An idle name costs one store call, as a mutex;
   * a waiter waits for every slot at once and takes the first freed.
   */
  concurrency?: number | undefined;
  /** The clock records carry, in epoch milliseconds (compared across isolates). Default `Date.now`. Waits and leases are also timed on `performance.now()`. */
  now?: (() => number) | undefined;
  /** Cancels the acquisition: already aborted, nothing is asked of the store; aborted later, the call rejects with its reason at once — even with a store call in flight — and leaves nothing held. */
  signal?: AbortSignal | undefined;
}

/** What one store's locks did in this isolate ({@link lockStats}): what is live now, and counts since the first use. */
export interface LockStats {
  /** Names held here now. */
  held: number;
  /** Acquisitions waiting in a local line now. */
  waiting: number;
  /** Acquisitions that got their lease. */
  acquisitions: number;
  /** ... of those, handed the lease by the holder before them here. */
  handOffs: number;
  /** Records taken over from a holder found stale (or a record that was not ours). */
  takeovers: number;
  /** Store calls made. */
  storeCalls: number;
  /** ... of those that failed (timed out included). */
  storeFailures: number;
  /** ... of those that did not answer within `storeTimeoutMs`. */
  storeTimeouts: number;
  /** Failed writes that a read-back found applied after all. */
  readBacksApplied: number;
  /** Waits on the store's `changed` instead of polling (each one store call, in `storeCalls` too). */
  watches: number;
  /** ... of those, ended by the store saying the record changed. */
  wakeUps: number;
  /** Reads a poller would have made while those watches waited: the polls they saved. */
  pollsSaved: number;
}

/** What the locks of `store` (acquireLock, withLock, serializers over it) did in this isolate; zeros for a store not used yet. */
export function lockStats(store: LockStore): LockStats;

/** A held lock: a lease that runs `staleMs` from its record's time, moved by `renew`. */
export interface Lock {
  readonly name: string;
  /** Which of the name's `concurrency` slots this holder has: 0 … `concurrency` − 1 (0 for a mutex). */
  readonly slot: number;
  /** The token in the lock record while this lock is held: 128 random bits, hex. Acquisitions handed on within one local batch share it; `fence` is unique to each. */
  readonly token: string;
  /** Strictly greater than every earlier acquisition's fence for this name, across releases and takeovers; at least the acquirer's `now()` in microseconds when it wrote the record, so fences stay above every earlier one after the store lost the record (given the clock bound: README, "What the lock promises"). */
  readonly fence: number;
  /** In `now`'s milliseconds: before it nobody may take this lease over. The lease also ends `staleMs` after its record was written on `performance.now()`, if that comes first. */
  readonly heldUntil: number;
  /** Aborts once this holder has lost the lease: at release, when a renewal finds it taken over, or when `heldUntil` passes unrenewed. Reading it first arms its timer; unread, it costs nothing. */
  readonly signal: AbortSignal;
  /** One CAS that moves `heldUntil` to `now() + staleMs`, keeping token and fence: true, or false once the lease is lost (taken over, released, or past its end — then with no store call). A CAS whose answer was lost is read back and counts when it applied. Rejects with `LockStoreError` when the store fails (the lease then runs to its old end). */
  renew(): Promise<boolean>;
  /** Frees the record if it still carries this token (a late release after a takeover changes nothing); twice is harmless. It never waits behind a renewal in flight (it reads the record first instead). A lock never released is taken over once its lease ends, by other isolates and by the waiters in this one. */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Takes the lock `name` in `store` (one of its slots, with `concurrency` above 1), or resolves to
 * `undefined` when live holders kept it for the whole `waitMs`. Contenders in one isolate (over one store object) queue first come, first
 * served, and a release hands the lock to the next of them directly (one store call per batch of
 * hand-offs). Settles within `waitMs` plus one store call's bound (`storeTimeoutMs`). Rejects
 * with a `LockStoreError` when the store fails or does not answer in time, a
 * `ConcurrencyMismatch` when the name is taken with another `concurrency`, the signal's reason
 * the moment it aborts, and a `TypeError`/`RangeError` for a bad store, name or option; a
 * Workers KV namespace is refused (it has no conditional put).
 */
export function acquireLock(store: LockStore, name: string, options?: LockOptions): Promise<Lock | undefined>;

/**
 * Acquires `name`, runs `fn(lock)`, renews the lease every `staleMs / 3` while `fn` runs, and
 * releases when it settles, with `fn`'s value or error as its own. Rejects with `LockUnavailable`
 * when a live holder kept the name for `waitMs`, and as `acquireLock` otherwise.
 */
export function withLock<T>(store: LockStore, name: string, fn: (lock: Lock) => T | PromiseLike<T>, options?: LockOptions): Promise<Awaited<T>>;

/**
 * An R2 bucket as a lock store: create by `onlyIf: { etagDoesNotMatch: '*' }`, CAS by
 * `onlyIf: { etagMatches }`. Records live under `prefix` (default `keyturn-lock/`).
 */
export class R2Store implements LockStore {
  constructor(bucket: { get(key: string): Promise<unknown>; put(key: string, value: string, options?: unknown): Promise<unknown> }, options?: { prefix?: string | undefined });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/**
 * Redis as a lock store over any client: `evalFn(script, keys, args)` runs a Lua script and
 * resolves to its reply (nil → null). Each record is one string (version, then value) under
 * `prefix` (default `keyturn-lock:`). With `evalShaFn(sha, keys, args)` (EVALSHA), a call names
 * its script by SHA-1 and sends it through `evalFn` only when the server answers NOSCRIPT.
 */
export class RedisStore implements LockStore {
  constructor(
    evalFn: (script: string, keys: string[], args: string[]) => Promise<unknown>,
    options?: {
      prefix?: string | undefined;
      evalShaFn?: ((sha: string, keys: string[], args: string[]) => Promise<unknown>) | undefined;
      /**
       * Subscribes to `channel` on a connection of its own, calling `onMessage` for each
       * message; resolves, once subscribed, to a function that unsubscribes. With it the store
       * has `changed`, and a waiter for a name held elsewhere is woken by the holder's release.
       */
      subscribe?: ((channel: string, onMessage: () => void) => Promise<(() => unknown) | void> | (() => unknown) | void) | undefined;
    },
  );
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
  /** With `options.subscribe` only. */
  changed?: ((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined;
}

/**
 * DynamoDB as a lock store, over the aggregated `DynamoDB` client of `@aws-sdk/client-dynamodb`
 * v3 (`new DynamoDB(config)`; the package imports nothing from the SDK). Each record is one item
 * of `table`, `{ [keyAttribute]: name, value, version }` (strings), in a table whose only key is
 * the string partition key `keyAttribute` (default `pk`). Create is a PutItem conditioned on
 * `attribute_not_exists` of the key; replace, a PutItem conditioned on the version; reads are
 * strongly consistent (`ConsistentRead`). Two requests an uncontended acquire and release.
 *
 * Construction makes no request: `await store.setup()` creates the table if it is missing. A
 * call on a missing table fails (`LockStoreError` from the lock).
 *
 * Not guaranteed: an item at a lock's name that is not the store's (no string `value` and
 * `version`) is never overwritten or released, but a lock over that name fails until it is
 * gone; give the locks a table of their own. There is no `changed`: a waiter for a name held
 * elsewhere polls, a read (one read capacity unit) per pause.
 *
 * # Errors
 * `TypeError` for a client without `putItem`/`getItem` (the `DynamoDBClient` of `send` and the
 * document client are not it) or unknown options; `RangeError` for a `table` that is not a
 * DynamoDB table name or a `keyAttribute` that is not an identifier (or is `value`/`version`).
 * A method rejects (never throws) with the client's error, or a `TypeError` for an answer that
 * is not DynamoDB's; `ConditionalCheckFailedException` is the `null` answer (when the SDK had
 * retried the request, a consistent read first tells whether an earlier attempt applied it).
 */
export class DynamoDbStore implements LockStore {
  constructor(
    client: {
      putItem(input: object): Promise<unknown>;
      getItem(input: object): Promise<unknown>;
      describeTable?(input: object): Promise<unknown>;
      createTable?(input: object): Promise<unknown>;
    },
    options: { table: string; keyAttribute?: string | undefined },
  );
  /**
   * Creates the table if it is missing — string partition key `keyAttribute`, on-demand
   * capacity (PAY_PER_REQUEST) — and resolves once it is ACTIVE. Idempotent, and safe to call
   * from several processes at once. Needs `dynamodb:DescribeTable` (and `CreateTable` when the
   * table is missing); the locks themselves need only `GetItem` and `PutItem`.
   *
   * # Errors
   * `LockStoreError` (`cause`: the client's error) when a request fails, when the table exists
   * with another key, or when it is not ACTIVE within 5 minutes; `TypeError` for a client
   * without `describeTable` and `createTable`.
   */
  setup(): Promise<void>;
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}

/**
 * PostgreSQL as a lock store over any client: `query(text, params)` runs one statement with
 * `$1…` parameters and resolves to its rows (an array of objects by column name). Records are
 * rows of `table` (default `keyturn_locks`): create is `INSERT … ON CONFLICT DO NOTHING
 * RETURNING`, replace an `UPDATE … WHERE key = $1 AND version = $2 RETURNING`, read a `SELECT`,
 * each one statement and so atomic. Versions are made by the store (random, never repeated), so
 * a record deleted and written again never takes an old version back.
 *
 * Construction does no I/O: `await store.setup()` creates the table once per database. Every
 * failure of `query`, thrown or rejected, and every answer that is not the statement's rows,
 * rejects with `LockStoreError` (`cause`: the client's error, or a `TypeError` saying what was
 * wrong), as does a call on a database without the table. A row that is not a keyturn record
 * is never released or overwritten: the lock refuses it. The store does not keep data safe
 * beyond what the server keeps (its `synchronous_commit`, its replicas).
 */
export class PostgresStore implements LockStore {
  /**
   * @throws {TypeError} `query` is not a function, an option is unknown or of the wrong type.
   * @throws {RangeError} `options.table` is not a lower-case identifier (`[a-z_][a-z0-9_]*`),
   * optionally `schema.table`, of at most 63 characters.
   */
  constructor(
    query: (text: string, params: unknown[]) => unknown[] | PromiseLike<unknown[]>,
    options?: {
      /** The table's name; default `keyturn_locks`. Also the NOTIFY channel's. */
      table?: string | undefined;
      /**
       * LISTENs on `channel` on a connection of its own (quote it: `LISTEN "${channel}"`),
       * calling `onNotify(payload)` for each notification; resolves, once listening, to a
       * function that stops listening. With it the store has `changed`: a waiter marks the row
       * it waits on, and a replace notifies (in its own statement) only a row so marked, so
       * writes pay for NOTIFY only while someone waits. Without it the lock polls.
       */
      listen?: ((channel: string, onNotify: (payload?: string) => void) => Promise<(() => unknown) | void> | (() => unknown) | void) | undefined;
    },
  );
  /** Creates the table if it does not exist (idempotent, safe from several processes at once); resolves once it is usable. Rejects with `LockStoreError`. */
  setup(): Promise<void>;
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
  /** With `options.listen` only (absent otherwise). A wait on a record that does not exist reads again every 25 ms: creates do not notify. */
  changed?: ((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined;
}

/**
 * Durable Objects as a lock store: each lock name is routed to its own `LockDurableObject`
 * (`idFromName(prefix + name)`) over RPC. `prefix` defaults to `keyturn-lock:`.
 */
export class DurableObjectStore implements LockStore {
  constructor(namespace: { idFromName(name: string): unknown; get(id: unknown): unknown }, options?: { prefix?: string | undefined });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
  changed(key: string, version: string | null, ms: number): Promise<boolean>;
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
  changed(key: string, version: string | null, ms: number): boolean | Promise<boolean>;
}

/** A part of a Deno KV key (`Deno.KvKeyPart`), restated so these types need none of Deno's. */
export type DenoKvKeyPart = Uint8Array | string | number | bigint | boolean | symbol;

/**
 * What `DenoKvStore` uses of `Deno.openKv()`'s handle. Keys are read-only arrays, as Deno's
 * `KvKey` is: a mutable array here would refuse `Deno.Kv` itself.
 */
export interface DenoKvHandle {
  get(key: readonly DenoKvKeyPart[]): Promise<{ value: unknown; versionstamp: string | null }>;
  atomic(): unknown;
  watch?(keys: readonly (readonly DenoKvKeyPart[])[]): ReadableStream<readonly { versionstamp: string | null }[]>;
}

/**
 * Deno KV as a lock store: `atomic().check({ key, versionstamp })` for create and CAS. Records
 * live under the key prefix (default `['keyturn-lock']`).
 */
export class DenoKvStore implements LockStore {
  constructor(kv: DenoKvHandle, options?: { prefix?: readonly DenoKvKeyPart[] | undefined });
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
  /** When the handle has `watch` (`kv.watch`): a waiter for a name held elsewhere is woken by its release. */
  changed?: ((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined;
}

/**
 * SQLite as a lock store over any driver: `query(sql, params)` runs one statement with `params`
 * bound to its `?`s in order and answers its rows (objects by column name, or arrays of columns),
 * or a promise of them. One dialect — SQLite 3.35 or later, for `RETURNING` — serves D1, the
 * Durable Object SQL API, libSQL/Turso, `node:sqlite`, better-sqlite3 and `bun:sqlite`. Records
 * are rows of `table` (default `keyturn_locks`: letters, digits and `_`, else a `RangeError`).
 *
 * Each method is one statement, atomic in the database: create is `INSERT … ON CONFLICT DO
 * NOTHING RETURNING`, replace `UPDATE … WHERE key = ? AND version = ? RETURNING`. Versions are
 * text chosen by the writer, so none repeats, even for a row deleted and created again.
 *
 * Not done: no `changed` (SQLite tells nobody of a write), so a lock over this store polls.
 * Construction does no I/O; a fresh database needs `await store.setup()` once.
 *
 * # Errors
 * Every method rejects — never throws — with `LockStoreError` (`cause`: the driver's error)
 * when `query` throws, rejects, or answers anything but the rows asked for (a D1 or libSQL
 * result object, not its rows, is refused); a missing table is one too.
 */
export class SqliteStore implements LockStore {
  constructor(query: (sql: string, params: string[]) => unknown, options?: { table?: string | undefined });
  /** Creates the table if it does not exist (idempotent); rejects with `LockStoreError` when that fails. */
  setup(): Promise<void>;
  create(key: string, value: string): Promise<string | null>;
  read(key: string): Promise<{ value: string; version: string } | null>;
  replace(key: string, version: string, value: string): Promise<string | null>;
}
