// The embedded store: records in this isolate's memory, with exact create-if-absent and
// compare-and-set — the keyturn crate's `MemoryStore` (src/store.rs), written in JS because a `Map`
// costs no wasm; tests/js/stores.test.mjs holds it to the same contract as every store. Locks
// over it exclude within one isolate only.
import { wrongType } from '../arguments.js';
import { Watchers } from './watchers.js';

/**
 * @param {unknown} value
 * @param {string} what
 * @returns {asserts value is string}
 */
function checkString(value, what) {
  if (typeof value !== 'string') throw wrongType(what, 'a string', value);
}

export class MemoryStore {
  /** @type {Map<string, { value: string, version: string }>} */
  #records = new Map();
  #versions = 0;
  /** each key's `changed` calls waiting */
  #watchers = new Watchers();

  /**
   * @param {string} key
   * @param {string} value
   */
  #put(key, value) {
    const version = String(++this.#versions);
    this.#records.set(key, { value, version });
    this.#watchers.tell(key);
    return version;
  }

  /**
   * Resolves to the new version, or null if a record exists.
   * @param {string} key
   * @param {string} value
   */
  async create(key, value) {
    checkString(key, 'key');
    checkString(value, 'value');
    return this.#records.has(key) ? null : this.#put(key, value);
  }

  /**
   * Resolves to `{ value, version }`, or null.
   * @param {string} key
   */
  async read(key) {
    checkString(key, 'key');
    const record = this.#records.get(key);
    return record === undefined ? null : { value: record.value, version: record.version };
  }

  /**
   * Resolves to the new version if the record's version is still `version`, else null.
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  async replace(key, version, value) {
    checkString(key, 'key');
    checkString(version, 'version');
    checkString(value, 'value');
    return this.#records.get(key)?.version === version ? this.#put(key, value) : null;
  }

  /**
   * Resolves to true once the record under `key` no longer has `version` (null: once it
   * exists): at once if it already has not, else at the next write of it; to false after `ms`.
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  async changed(key, version, ms) {
    checkString(key, 'key');
    if (version !== null) checkString(version, 'version');
    if (typeof ms !== 'number' || !(ms >= 0)) throw wrongType('ms', 'a number ≥ 0', ms);
    if ((this.#records.get(key)?.version ?? null) !== version) return true;
    return this.#watchers.next(key, ms);
  }
}
