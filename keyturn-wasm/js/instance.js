// One wasm module's instance as the package's JS sees it: alive, or failed for good — a trap
// (a bug, or memory exhausted) may leave Rust state half changed, so nothing made on that
// instance is called again. Static JS, copied into pkg/ by the build.
import { KeyturnInstanceFailed } from './errors.js';

/**
 * What a module's instance tells each JS value its cores still know of when it fails.
 * @typedef {(value: unknown, failure: KeyturnInstanceFailed) => void} Settle
 */

/**
 * The generated JS of a wasm-bindgen module built with `--experimental-reset-state-function`.
 * @typedef {{ __wbg_reset_state: () => void }} Glue
 */

/**
 * The live instance of a wasm-bindgen module. After a failure, `current()` gives a fresh
 * instance (`__wbg_reset_state` makes one from the compiled module, synchronously), so
 * serializers and locks made afterwards work; those made before keep failing with the same
 * error.
 */
export class InstanceHost {
  /** @type {Glue} */
  #glue;
  /** @type {Settle} */
  #settle;
  /** @type {Instance} */
  #current;

  /**
   * @param {Glue} glue
   * @param {Settle} settle told, when an instance fails, of each value its cores held
   */
  constructor(glue, settle) {
    this.#glue = glue;
    this.#settle = settle;
    this.#current = new Instance(settle);
  }

  /** The live instance, made fresh if the last one failed. Throws its failure when the runtime refuses a fresh one. */
  current() {
    const instance = this.#current;
    if (instance.failure === undefined) return instance;
    try {
      this.#glue.__wbg_reset_state();
    } catch {
      throw instance.failure;
    }
    this.#current = new Instance(this.#settle);
    return this.#current;
  }
}

/**
 * One instance: `failure` is undefined while it is alive. Its cores know the JS values they
 * answer about (jobs, waiters) by a number: the index of the value here, held until let go.
 */
export class Instance {
  /** @type {KeyturnInstanceFailed | undefined} */
  failure = undefined;
  /** @type {Settle} */
  #settle;
  /** @type {unknown[]} */
  #held = [];
  /** @type {number[]} */
  #free = [];

  /** @param {Settle} settle */
  constructor(settle) {
    this.#settle = settle;
  }

  /**
   * Holds `value` for the cores: its number.
   * @param {unknown} value
   */
  hold(value) {
    const id = this.#free.length > 0 ? /** @type {number} */ (this.#free.pop()) : this.#held.length;
    this.#held[id] = value;
    return id;
  }

  /**
   * The value held as `id`.
   * @param {number} id
   */
  get(id) {
    return this.#held[id];
  }

  /**
   * `id` holds `value` from now on (what a call became: an acquisition its lock).
   * @param {number} id
   * @param {unknown} value
   */
  replace(id, value) {
    this.#held[id] = value;
  }

  /**
   * The cores no longer know `id`: its value is let go and its number is free.
   * @param {number} id
   */
  letGo(id) {
    this.#held[id] = undefined;
    this.#free.push(id);
  }

  /**
   * Called with what a call into this instance threw. A trap (`WebAssembly.RuntimeError`)
   * fails the instance for good: the answer is the instance's failure, and each value the
   * cores still held is settled with it (so what waits in it can be told). Anything else is an
   * ordinary error, answered as it is.
   * @param {unknown} error
   * @returns {unknown}
   */
  failed(error) {
    if (this.failure !== undefined) return this.failure;
    if (!(error instanceof WebAssembly.RuntimeError)) return error;
    const failure = new KeyturnInstanceFailed(error);
    this.failure = failure;
    for (const value of this.#held) {
      if (value === undefined) continue;
      try {
        this.#settle(value, failure);
      } catch {
        // one holder's trouble does not stop the others being told
      }
    }
    return failure;
  }
}
