// Deno KV as a LockStore: `atomic().check({ key, versionstamp })` makes create (versionstamp
// null: absent) and compare-and-set; a failed check commits nothing and answers `ok: false`.
// Versions are Deno KV's versionstamps.
import { OptionNames, wrongType } from '../arguments.js';

const OPTIONS = new OptionNames(['prefix']);

/**
 * What the store uses of a Deno KV handle (`Deno.openKv()`).
 * @typedef {object} DenoKv
 * @property {(key: unknown[]) => Promise<{ value: unknown, versionstamp: string | null }>} get
 * @property {() => DenoAtomic} atomic
 */

/**
 * @typedef {object} DenoAtomic
 * @property {(check: { key: unknown[], versionstamp: string | null }) => DenoAtomic} check
 * @property {(key: unknown[], value: string) => DenoAtomic} set
 * @property {() => Promise<{ ok: boolean, versionstamp?: string }>} commit
 */

/** A lock store over a Deno KV handle; records live under the key prefix (default ['keyturn-lock']). */
export class DenoKvStore {
  /** @type {DenoKv} */
  #kv;
  /** @type {unknown[]} */
  #prefix;
  /**
   * @param {DenoKv} kv
   * @param {{ prefix?: unknown[] }} [options]
   */
  constructor(kv, options) {
    if (kv === null || typeof kv !== 'object' || typeof kv.atomic !== 'function' || typeof kv.get !== 'function') {
      throw wrongType('kv', 'a Deno KV handle (from Deno.openKv())', kv);
    }
    OPTIONS.check(options, 'options');
    const prefix = options?.prefix ?? ['keyturn-lock'];
    if (!Array.isArray(prefix)) throw wrongType('options.prefix', 'an array of key parts or undefined', prefix);
    this.#kv = kv;
    this.#prefix = prefix;
  }

  /**
   * @param {string} key
   * @param {string | null} versionstamp
   * @param {string} value
   */
  async #write(key, versionstamp, value) {
    const path = [...this.#prefix, key];
    const result = await this.#kv.atomic().check({ key: path, versionstamp }).set(path, value).commit();
    return result.ok ? result.versionstamp : null;
  }

  /**
   * @param {string} key
   * @param {string} value
   */
  create(key, value) {
    return this.#write(key, null, value);
  }

  /** @param {string} key */
  async read(key) {
    const entry = await this.#kv.get([...this.#prefix, key]);
    return entry.versionstamp === null ? null : { value: entry.value, version: entry.versionstamp };
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  replace(key, version, value) {
    return this.#write(key, version, value);
  }
}
