// An R2 bucket as a LockStore. R2's conditional put is the whole trick: `etagDoesNotMatch: '*'`
// creates only if absent, `etagMatches` is a compare-and-set, and a failed condition answers
// null. R2 has no conditional delete, which the lock does not need: a released record stays.
import { MESSAGES } from '../constants.js';
import { OptionNames, typeError, wrongType } from '../arguments.js';

const OPTIONS = new OptionNames(['prefix']);

/**
 * What the store uses of an R2 bucket binding.
 * @typedef {object} R2Bucket
 * @property {(key: string, value: string, options: { onlyIf: { etagMatches?: string, etagDoesNotMatch?: string } }) => Promise<{ etag: string } | null>} put
 * @property {(key: string) => Promise<{ etag: string, text(): Promise<string> } | null>} get
 * @property {Function} head
 */

/**
 * A bucket binding: R2's, not a Workers KV namespace (which has no conditional put).
 * @param {unknown} bucket
 * @returns {asserts bucket is R2Bucket}
 */
function checkBucket(bucket) {
  if (bucket === null || typeof bucket !== 'object') throw wrongType('bucket', 'an R2 bucket binding', bucket);
  const has = (/** @type {string} */ method) => typeof (/** @type {Record<string, unknown>} */ (bucket))[method] === 'function';
  if (has('getWithMetadata')) throw typeError(MESSAGES.storeIsKv, { what: 'bucket' });
  if (!has('put') || !has('get') || !has('head')) {
    throw wrongType('bucket', 'an R2 bucket binding (with get, put and head)', bucket);
  }
}

/** A lock store over an R2 bucket; lock records live under `prefix` (default `keyturn-lock/`). */
export class R2Store {
  /** @type {R2Bucket} */
  #bucket;
  /** @type {string} */
  #prefix;
  /**
   * @param {unknown} bucket
   * @param {{ prefix?: string }} [options]
   */
  constructor(bucket, options) {
    checkBucket(bucket);
    OPTIONS.check(options, 'options');
    const prefix = options?.prefix ?? 'keyturn-lock/';
    if (typeof prefix !== 'string') throw wrongType('options.prefix', 'a string or undefined', prefix);
    this.#bucket = bucket;
    this.#prefix = prefix;
  }

  /**
   * @param {string} key
   * @param {string} value
   */
  async create(key, value) {
    const object = await this.#bucket.put(this.#prefix + key, value, { onlyIf: { etagDoesNotMatch: '*' } });
    return object ? object.etag : null;
  }

  /** @param {string} key */
  async read(key) {
    const object = await this.#bucket.get(this.#prefix + key);
    return object ? { value: await object.text(), version: object.etag } : null;
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  async replace(key, version, value) {
    const object = await this.#bucket.put(this.#prefix + key, value, { onlyIf: { etagMatches: version } });
    return object ? object.etag : null;
  }
}
