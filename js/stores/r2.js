// An R2 bucket as a LockStore. R2's conditional put is the whole trick: `etagDoesNotMatch: '*'`
// creates only if absent, `etagMatches` is a compare-and-set, and a failed condition answers
// null. R2 has no conditional delete, which the lock does not need: a released record stays.

const checkBucket = (bucket) => {
  if (bucket === null || typeof bucket !== 'object' || typeof bucket.put !== 'function' || typeof bucket.get !== 'function') {
    throw new TypeError('keyturn: bucket must be an R2 bucket binding (with get and put)');
  }
};

/** A lock store over an R2 bucket; lock records live under `prefix` (default `keyturn-lock/`). */
export class R2Store {
  #bucket;
  #prefix;
  constructor(bucket, { prefix = 'keyturn-lock/' } = {}) {
    checkBucket(bucket);
    if (typeof prefix !== 'string') throw new TypeError('keyturn: options.prefix must be a string');
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
