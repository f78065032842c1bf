// What a store that tells changes keeps for its `changed` calls: each key's callers waiting for
// its next write (memory.js, and the Durable Object in durable-object.js). Static JS, copied
// into pkg/ by the build.

export class Watchers {
  /** @type {Map<string, Set<() => void>>} */
  #waiting = new Map();

  /**
   * A promise of `true` at the next `tell(key)`, or of `false` after `ms`.
   * @param {string} key
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  next(key, ms) {
    return new Promise((resolve) => {
      let waiting = this.#waiting.get(key);
      if (waiting === undefined) this.#waiting.set(key, (waiting = new Set()));
      const tell = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const still = this.#waiting.get(key);
        still?.delete(tell);
        if (still?.size === 0) this.#waiting.delete(key);
        resolve(false);
      }, Math.min(ms, 2 ** 31 - 1));
      waiting.add(tell);
    });
  }

  /**
   * `key`'s record was just written: its callers waiting are answered.
   * @param {string} key
   */
  tell(key) {
    if (this.#waiting.size === 0) return;
    const waiting = this.#waiting.get(key);
    if (waiting === undefined) return;
    this.#waiting.delete(key);
    for (const tell of waiting) tell();
  }
}
