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
