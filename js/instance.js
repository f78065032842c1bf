// One wasm module's instance as the package's JS sees it: alive, or failed for good — a trap
// (a bug, or memory exhausted) may leave Rust state half changed, so nothing made on that
// instance is called again. Static JS, copied into pkg/ by the build.
import { KeyturnInstanceFailed } from './errors.js';

/**
 * The live instance of a wasm-bindgen module. `glue` is its generated JS, built with
 * `--experimental-reset-state-function`: after a failure, `current()` gives a fresh instance
 * (`__wbg_reset_state` makes one from the compiled module, synchronously), so serializers and
 * locks made afterwards work; those made before keep failing with the same error.
 */
export class InstanceHost {
  #glue;
  #current;

  constructor(glue) {
    this.#glue = glue;
    this.#current = new Instance(glue);
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
    this.#current = new Instance(this.#glue);
    return this.#current;
  }
}

/** One instance: `failure` is undefined while it is alive. */
export class Instance {
  failure = undefined;
  #glue;

  constructor(glue) {
    this.#glue = glue;
  }

  /**
   * Called with what a call into this instance threw. A trap (`WebAssembly.RuntimeError`)
   * fails the instance for good: the answer is the instance's failure, and `settle` is called
   * with each JS value the instance still holds (so what waits in it can be told). Anything
   * else is an ordinary error, answered as it is.
   */
  failed(error, settle) {
    if (this.failure !== undefined) return this.failure;
    if (!(error instanceof WebAssembly.RuntimeError)) return error;
    this.failure = new KeyturnInstanceFailed(error);
    let table;
    try {
      // Every JS value Rust holds is in the module's externref table. Until a reset, the glue
      // answers the exports of this instance.
      table = this.#glue.initSync(undefined).__wbindgen_externrefs;
    } catch {
      return this.failure;
    }
    for (let i = 0; i < table.length; i++) {
      try {
        settle(table.get(i), this.failure);
      } catch {
        // one holder's trouble does not stop the others being told
      }
    }
    return this.failure;
  }
}
