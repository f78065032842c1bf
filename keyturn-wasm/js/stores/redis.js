// Redis as a LockStore, over any client: `new RedisStore(evalFn)` where
// `evalFn(script, keys, args)` runs a Lua script and resolves to its reply (nil → null). Each
// method is one script, so each is atomic on the server. A record is one string: its version
// (32 hex digits, chosen by the writer so that no version repeats) followed by its value —
// plain GET/SET inside the scripts, the cheapest a script can be. A write answers 1 or nil, not
// the version: the writer knows it, and a client reads an integer reply faster than a string.
//
//   node-redis:     new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }))
//   ioredis:        new RedisStore((script, keys, args) => client.eval(script, keys.length, ...keys, ...args))
//   @upstash/redis: new RedisStore((script, keys, args) => redis.eval(script, keys, args))
//
// With `{ evalShaFn }` a call names its script by SHA-1 instead of sending it (EVALSHA), and
// sends it (EVAL, which caches it on the server) only when the server answers NOSCRIPT: a
// script's source is not sent with every call.
//
//   node-redis:     { evalShaFn: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }) }
//   ioredis:        { evalShaFn: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args) }
//   @upstash/redis: { evalShaFn: (sha, keys, args) => redis.evalsha(sha, keys, args) }

// Each `sha` is its source's SHA-1 (tests/js/stores.test.mjs fails if one is not).
import { OptionNames, wrongType } from '../arguments.js';
import { Versions } from './versions.js';

const OPTIONS = new OptionNames(['prefix', 'evalShaFn', 'subscribe']);

/**
 * Runs a script (by its source, or by its SHA-1) on `keys` with `args`: its reply.
 * @typedef {(script: string, keys: string[], args: string[]) => unknown} EvalFn
 */

/**
 * Subscribes to `channel`, calling `onMessage` for each message: resolves (or returns), once the
 * subscription is active, a function that unsubscribes.
 * @typedef {(channel: string, onMessage: () => void) => unknown} SubscribeFn
 */

/** @typedef {{ source: string, sha: string }} Script */

// SET NX: the create is Redis's own create-if-absent. Each write publishes on the record's key
// as a channel when someone subscribed to it (a `changed` waiting), and only then.
const CREATE = {
  source: `if redis.call('SET', KEYS[1], ARGV[2] .. ARGV[1], 'NX') then
  if redis.call('PUBSUB', 'NUMSUB', KEYS[1])[2] > 0 then redis.call('PUBLISH', KEYS[1], '') end
  return 1
end
return false`,
  sha: '5a6200f1441d3ed258c00448425a1ddd54c7c611',
};

const READ = {
  source: `return redis.call('GET', KEYS[1])`,
  sha: 'd3c21d0c2b9ca22f82737626a27bcaf5d288f99f',
};

const REPLACE = {
  source: `local record = redis.call('GET', KEYS[1])
if not record or string.sub(record, 1, 32) ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[3] .. ARGV[2])
if redis.call('PUBSUB', 'NUMSUB', KEYS[1])[2] > 0 then redis.call('PUBLISH', KEYS[1], '') end
return 1`,
  sha: '5d3141d46232760fd87c2023c26b65d94f7e94b0',
};

/**
 * The server's answer to EVALSHA of a script it does not have (after a restart or SCRIPT FLUSH).
 * @param {unknown} error
 */
const noScript = (error) => /NOSCRIPT/.test(String(/** @type {{ message?: unknown } | undefined} */ (error)?.message ?? error));

// A version is 32 hex digits: this store object's id and its count of writes (`Versions`).
const VERSION_LENGTH = 32;

const describe = (/** @type {unknown} */ reply) => (typeof reply === 'string' || typeof reply === 'number' ? JSON.stringify(reply) : typeof reply);

/**
 * A write's reply: `version` when the script wrote (1), null when it did not (nil).
 * @param {unknown} reply
 * @param {string} version
 * @param {string} what
 */
const written = (reply, version, what) => {
  if (reply === null || reply === undefined) return null;
  // 1 as a number, or as a string or bigint from clients that map integer replies so.
  if (reply === 1 || reply === '1' || reply === 1n) return version;
  throw new TypeError(`keyturn: redis answered ${what} with ${describe(reply)}, not 1 or nil`);
};

/**
 * A read's reply: `{ value, version }`, or null for no record.
 * @param {unknown} reply
 */
function versioned(reply) {
  if (reply === null || reply === undefined) return null;
  const record = reply instanceof Uint8Array ? new TextDecoder().decode(reply) : reply;
  if (typeof record !== 'string') throw new TypeError(`keyturn: redis answered read with ${typeof reply}, not a string or nil`);
  if (record.length < VERSION_LENGTH) throw new TypeError('keyturn: the redis record is not one of RedisStore\'s');
  return { value: record.slice(VERSION_LENGTH), version: record.slice(0, VERSION_LENGTH) };
}

/** A lock store over Redis; lock records are strings under `prefix` (default `keyturn-lock:`). */
export class RedisStore {
  /** @type {EvalFn} */
  #eval;
  /** @type {EvalFn | undefined} */
  #evalSha;
  /** @type {string} */
  #prefix;
  #versions = new Versions();
  /**
   * With `subscribe`: true once `key`'s record no longer has `version` (null: once it exists),
   * false after `ms`. Without, there is none, and a lock over this store polls.
   * @type {((key: string, version: string | null, ms: number) => Promise<boolean>) | undefined}
   */
  changed;
  /**
   * @param {EvalFn} evalFn
   * @param {{ prefix?: string, evalShaFn?: EvalFn, subscribe?: SubscribeFn }} [options]
   */
  constructor(evalFn, options) {
    if (typeof evalFn !== 'function') throw wrongType('evalFn', 'a function (script, keys, args) => reply', evalFn);
    OPTIONS.check(options, 'options');
    const prefix = options?.prefix ?? 'keyturn-lock:';
    const evalShaFn = options?.evalShaFn;
    if (typeof prefix !== 'string') throw wrongType('options.prefix', 'a string or undefined', prefix);
    if (evalShaFn !== undefined && typeof evalShaFn !== 'function') {
      throw wrongType('options.evalShaFn', 'a function (sha, keys, args) => reply, or undefined', evalShaFn);
    }
    const subscribe = options?.subscribe;
    if (subscribe !== undefined && typeof subscribe !== 'function') {
      throw wrongType('options.subscribe', 'a function (channel, onMessage) => unsubscribe, or undefined', subscribe);
    }
    this.#eval = evalFn;
    this.#evalSha = evalShaFn;
    this.#prefix = prefix;
    if (subscribe !== undefined) this.changed = (key, version, ms) => this.#changed(subscribe, key, version, ms);
  }

  /**
   * Subscribes to the record's key as a channel, then reads the record (a write between the
   * caller's read and the subscription is seen here), then waits for a message or `ms`; the
   * subscription goes at the end. A write publishes only while someone is subscribed.
   * @param {SubscribeFn} subscribe
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  async #changed(subscribe, key, version, ms) {
    if (typeof key !== 'string') throw wrongType('key', 'a string', key);
    /** @type {() => void} */
    let tell = () => {};
    /** @type {Promise<boolean>} */
    const told = new Promise((resolve) => {
      tell = () => resolve(true);
    });
    const unsubscribe = await subscribe(this.#prefix + key, () => tell());
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    try {
      if (((await this.read(key))?.version ?? null) !== version) return true;
      /** @type {Promise<boolean>} */
      const timeout = new Promise((resolve) => {
        timer = setTimeout(() => resolve(false), Math.min(Math.max(0, ms), 2 ** 31 - 1));
      });
      return await Promise.race([told, timeout]);
    } finally {
      clearTimeout(timer);
      if (typeof unsubscribe === 'function') await Promise.resolve(unsubscribe()).catch(() => {});
    }
  }

  /**
   * Runs `script`: by its SHA-1 when the client can, sending it only when the server lacks it.
   * Promise reactions, not async functions: one promise per call, where two nested async
   * functions would make more.
   * @param {Script} script
   * @param {string[]} keys
   * @param {string[]} args
   * @returns {Promise<unknown>}
   */
  #run(script, keys, args) {
    if (this.#evalSha === undefined) return Promise.resolve(this.#eval(script.source, keys, args));
    return Promise.resolve(this.#evalSha(script.sha, keys, args)).then(undefined, (error) => {
      if (!noScript(error)) throw error;
      return this.#eval(script.source, keys, args);
    });
  }

  // Each method answers a promise, never a throw: a client or a key that throws is a rejection.

  /**
   * @param {string} key
   * @param {string} value
   */
  create(key, value) {
    return this.#write(CREATE, key, [value], 'create');
  }

  /** @param {string} key */
  read(key) {
    try {
      return this.#run(READ, [this.#prefix + key], []).then(versioned);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  replace(key, version, value) {
    return this.#write(REPLACE, key, [version, value], 'replace');
  }

  /**
   * A write by `script` of `args` and then the new version: that version, or null.
   * @param {Script} script
   * @param {string} key
   * @param {string[]} args
   * @param {string} what
   */
  #write(script, key, args, what) {
    try {
      const version = this.#versions.next();
      args.push(version);
      return this.#run(script, [this.#prefix + key], args).then((reply) => written(reply, version, what));
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
