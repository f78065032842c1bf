// Redis as a LockStore, over any client: `new RedisStore(evalFn)` where
// `evalFn(script, keys, args)` runs a Lua script and resolves to its reply (nil → null). Each
// method is one script, so each is atomic on the server. A record is one string: its version
// (32 hex digits, random, so a record deleted and re-created never repeats one) followed by its
// value — plain GET/SET inside the scripts, the cheapest a script can be.
//
//   node-redis:     new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }))
//   ioredis:        new RedisStore((script, keys, args) => client.eval(script, keys.length, ...keys, ...args))
//   @upstash/redis: new RedisStore((script, keys, args) => redis.eval(script, keys, args))

// SET NX: the create is Redis's own create-if-absent.
const CREATE = `if redis.call('SET', KEYS[1], ARGV[2] .. ARGV[1], 'NX') then return ARGV[2] end
return false`;

const READ = `return redis.call('GET', KEYS[1])`;

const REPLACE = `local record = redis.call('GET', KEYS[1])
if not record or string.sub(record, 1, 32) ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[3] .. ARGV[2])
return ARGV[3]`;

const VERSION_LENGTH = 32;

// A version is this store object's random id (64 bits, drawn on its first write: workerd
// refuses randomness at global scope, where a store may be constructed) and its count of writes,
// 16 hex digits each. No two writers share an id, and no writer repeats a count, so no version
// repeats — without a crypto call per write, which costs more than the rest of the call's own work.
const hex16 = (n) => n.toString(16).padStart(16, '0');

const text = (reply, what) => {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === 'string') return reply;
  if (reply instanceof Uint8Array) return new TextDecoder().decode(reply);
  throw new TypeError(`keyturn: redis answered ${what} with ${typeof reply}, not a string or nil`);
};

/** A lock store over Redis; lock records are strings under `prefix` (default `keyturn-lock:`). */
export class RedisStore {
  #eval;
  #prefix;
  #id = '';
  #writes = 0;
  constructor(evalFn, { prefix = 'keyturn-lock:' } = {}) {
    if (typeof evalFn !== 'function') throw new TypeError('keyturn: evalFn must be a function (script, keys, args) => reply');
    if (typeof prefix !== 'string') throw new TypeError('keyturn: options.prefix must be a string');
    this.#eval = evalFn;
    this.#prefix = prefix;
  }

  #newVersion() {
    if (this.#id === '') {
      const words = crypto.getRandomValues(new Uint32Array(2));
      this.#id = words[0].toString(16).padStart(8, '0') + words[1].toString(16).padStart(8, '0');
    }
    this.#writes += 1;
    return this.#id + hex16(this.#writes);
  }

  async create(key, value) {
    return text(await this.#eval(CREATE, [this.#prefix + key], [value, this.#newVersion()]), 'create');
  }

  async read(key) {
    const record = text(await this.#eval(READ, [this.#prefix + key], []), 'read');
    if (record === null) return null;
    if (record.length < VERSION_LENGTH) throw new TypeError('keyturn: the redis record is not one of RedisStore\'s');
    return { value: record.slice(VERSION_LENGTH), version: record.slice(0, VERSION_LENGTH) };
  }

  async replace(key, version, value) {
    return text(await this.#eval(REPLACE, [this.#prefix + key], [version, value, this.#newVersion()]), 'replace');
  }
}
