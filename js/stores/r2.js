// An R2 bucket as a LockStore. R2's conditional put is the whole trick: `etagDoesNotMatch: '*'`
// creates only if absent, `etagMatches` is a compare-and-set, and a failed condition answers
// null. R2 has no conditional delete, which the lock does not need: a released record stays.
import { MESSAGES } from '../constants.js';
import { OptionNames, typeError, wrongType } from '../arguments.js';

const OPTIONS = new OptionNames(['prefix']);

/** A bucket binding: R2's, not a Workers KV namespace (which has no conditional put). */
function checkBucket(bucket) {
  if (bucket === null || typeof bucket !== 'object') throw wrongType('bucket', 'an R2 bucket binding', bucket);
  if (typeof bucket.getWithMetadata === 'function') throw typeError(MESSAGES.storeIsKv, { what: 'bucket' });
  if (typeof bucket.put !== 'function' || typeof bucket.get !== 'function' || typeof bucket.head !== 'function') {
    throw wrongType('bucket', 'an R2 bucket binding (with get, put and head)', bucket);
  }
}

/** A lock store over an R2 bucket; lock records live under `prefix` (default `keyturn-lock/`). */
export class R2Store {
  #bucket;
  #prefix;
  constructor(bucket, options) {
    checkBucket(bucket);
    OPTIONS.check(options, 'options');
    const prefix = options?.prefix ?? 'keyturn-lock/';
    if (typeof prefix !== 'string') throw wrongType('options.prefix', 'a string or undefined', prefix);
    this.#bucket = bucket;
    this.#prefix = prefix;
  }

  async create(key, value) {
    const object = await this.#bucket.put(this.#prefix + key, value, { onlyIf: { etagDoesNotMatch: '*' } });
    return object ? object.etag : null;
  }

  async read(key) {
    const object = await this.#bucket.get(this.#prefix + key);
    return object ? { value: await object.text(), version: object.etag } : null;
  }

  async replace(key, version, value) {
    const object = await this.#bucket.put(this.#prefix + key, value, { onlyIf: { etagMatches: version } });
    return object ? object.etag : null;
  }
}
