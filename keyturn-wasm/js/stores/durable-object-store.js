// The LockStore side of Durable Objects: each lock name goes to its own `LockDurableObject`
// (`idFromName(prefix + name)`), over RPC. See durable-object.js for the class and its binding.
import { MESSAGES, fill } from '../constants.js';
import { OptionNames, typeError, wrongType } from '../arguments.js';

const OPTIONS = new OptionNames(['prefix']);

/** @typedef {import('../engine.js').Store} Store */

/**
 * What the store uses of a Durable Object namespace binding.
 * @typedef {object} Namespace
 * @property {(name: string) => unknown} idFromName
 * @property {(id: unknown) => Partial<Store>} get
 */

/**
 * A namespace binding, not one of its stubs (a stub answers every property as an RPC call).
 * @param {unknown} namespace
 * @returns {asserts namespace is Namespace}
 */
function checkNamespace(namespace) {
  if (namespace === null || typeof namespace !== 'object') throw wrongType('namespace', 'a Durable Object namespace bound to LockDurableObject', namespace);
  const binding = /** @type {{ id?: { equals?: unknown }, idFromName?: unknown, get?: unknown }} */ (namespace);
  if (typeof binding.id?.equals === 'function') throw typeError(MESSAGES.storeIsStub, { what: 'namespace' });
  if (typeof binding.idFromName !== 'function' || typeof binding.get !== 'function') {
    throw wrongType('namespace', 'a Durable Object namespace bound to LockDurableObject', namespace);
  }
}

/** A lock store over a namespace bound to `LockDurableObject`. */
export class DurableObjectStore {
  /** @type {Namespace} */
  #namespace;
  /** @type {string} */
  #prefix;
  /**
   * @param {unknown} namespace
   * @param {{ prefix?: string }} [options]
   */
  constructor(namespace, options) {
    checkNamespace(namespace);
    OPTIONS.check(options, 'options');
    const prefix = options?.prefix ?? 'keyturn-lock:';
    if (typeof prefix !== 'string') throw wrongType('options.prefix', 'a string or undefined', prefix);
    this.#namespace = namespace;
    this.#prefix = prefix;
  }

  /**
   * The object holding `key`'s record, whose `method` is called. Its methods are RPC methods:
   * without RPC (a compatibility date before 2024-04-03) a stub has none, which is named here.
   * @param {string} key
   * @param {keyof Store} method
   * @returns {Store}
   */
  #object(key, method) {
    const object = this.#namespace.get(this.#namespace.idFromName(this.#prefix + key));
    if (typeof object[method] !== 'function') throw new TypeError(`keyturn: ${fill(MESSAGES.storeNoRpc, { method })}`);
    return /** @type {Store} */ (object);
  }

  /**
   * @param {string} key
   * @param {string} value
   */
  create(key, value) {
    return this.#object(key, 'create').create(key, value);
  }

  /** @param {string} key */
  read(key) {
    return this.#object(key, 'read').read(key);
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  replace(key, version, value) {
    return this.#object(key, 'replace').replace(key, version, value);
  }

  /**
   * Answered by the object when it next writes `key`'s record, or after `ms`.
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   */
  changed(key, version, ms) {
    // Called as a method of the stub: every property of a stub, `call` too, is an RPC method.
    const object = /** @type {Required<Store>} */ (this.#object(key, 'changed'));
    return object.changed(key, version, ms);
  }
}
