// Deno KV as a LockStore: `atomic().check({ key, versionstamp })` makes create (versionstamp
// null: absent) and compare-and-set; a failed check commits nothing and answers `ok: false`.
// Versions are Deno KV's versionstamps. `changed` is `kv.watch`: its stream gives the key's
// entry as it is, then again at each write of it.
import { OptionNames, wrongType } from '../arguments.js';

const OPTIONS = new OptionNames(['prefix']);

/**
 * What the store uses of a Deno KV handle (`Deno.openKv()`).
 * @typedef {object} DenoKv
 * @property {(key: unknown[]) => Promise<{ value: unknown, versionstamp: string | null }>} get
 * @property {() => DenoAtomic} atomic
 * @property {((keys: unknown[][]) => ReadableStream<{ versionstamp: string | null }[]>) | undefined} [watch]
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
   * With a handle that has `watch` (Deno 1.40 and later, Deno Deploy): true once `key`'s record
   * no longer has `version` (null: once it exists), false after `ms`. Without, there is none,
   * and a lock over this store polls.
   * @type {((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined}
   */
  changed;
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
    const watch = kv.watch;
    if (typeof watch === 'function') this.changed = (key, version, ms) => this.#changed(watch, key, version, ms);
  }

  /**
   * Watches the record's key: the stream's first entry is the record as it is now (a write
   * between the caller's read and this watch is seen there), each later one follows a write.
   * The stream is cancelled at the answer, or after `ms`.
   * @param {NonNullable<DenoKv['watch']>} watch
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  async #changed(watch, key, version, ms) {
    if (typeof key !== 'string') throw wrongType('key', 'a string', key);
    if (typeof ms !== 'number' || !(ms >= 0)) throw wrongType('ms', 'a number ≥ 0', ms);
    const reader = watch.call(this.#kv, [[...this.#prefix, key]]).getReader();
    // Cancelling ends the stream: the pending read answers `done`.
    const timer = setTimeout(() => reader.cancel().catch(() => {}), Math.min(ms, 2 ** 31 - 1));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return false;
        if ((value[0]?.versionstamp ?? null) !== version) return true;
      }
    } finally {
      clearTimeout(timer);
      reader.cancel().catch(() => {});
    }
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
