// The LockStore side of Durable Objects: each lock name goes to its own `LockDurableObject`
// (`idFromName(prefix + name)`), over RPC. See durable-object.js for the class and its binding.

/** A lock store over a namespace bound to `LockDurableObject`. */
export class DurableObjectStore {
  #namespace;
  #prefix;
  constructor(namespace, { prefix = 'keyturn-lock:' } = {}) {
    if (namespace === null || typeof namespace !== 'object' || typeof namespace.idFromName !== 'function' || typeof namespace.get !== 'function') {
      throw new TypeError('keyturn: namespace must be a Durable Object namespace bound to LockDurableObject');
    }
    if (typeof prefix !== 'string') throw new TypeError('keyturn: options.prefix must be a string');
    this.#namespace = namespace;
    this.#prefix = prefix;
  }

  #object(key) {
    return this.#namespace.get(this.#namespace.idFromName(this.#prefix + key));
  }

  create(key, value) {
    return this.#object(key).create(key, value);
  }

  read(key) {
    return this.#object(key).read(key);
  }

  replace(key, version, value) {
    return this.#object(key).replace(key, version, value);
  }
}
