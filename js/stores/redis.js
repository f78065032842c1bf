// Redis as a LockStore, over any client: `new RedisStore(evalFn)` where
// `evalFn(script, keys, args)` runs a Lua script and resolves to its reply (nil → null). Each
// method is one script, so each is atomic on the server. A record is a hash {value, version};
// versions are random (128 bits), so a record deleted and re-created never repeats one.
//
//   node-redis:     new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }))
//   ioredis:        new RedisStore((script, keys, args) => client.eval(script, keys.length, ...keys, ...args))
//   @upstash/redis: new RedisStore((script, keys, args) => redis.eval(script, keys, args))

const CREATE = `if redis.call('EXISTS', KEYS[1]) == 1 then return false end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'version', ARGV[2])
return ARGV[2]`;

const READ = `local record = redis.call('HMGET', KEYS[1], 'value', 'version')
if not record[1] or not record[2] then return false end
return record`;

const REPLACE = `if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return false end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'version', ARGV[3])
return ARGV[3]`;

const newVersion = () => {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
};

const text = (reply, what) => {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === 'string') return reply;
  if (reply instanceof Uint8Array) return new TextDecoder().decode(reply);
  throw new TypeError(`keyturn: redis answered ${what} with ${typeof reply}, not a string or nil`);
};

/** A lock store over Redis; lock records are hashes under `prefix` (default `keyturn-lock:`). */
export class RedisStore {
  #eval;
  #prefix;
  constructor(evalFn, { prefix = 'keyturn-lock:' } = {}) {
    if (typeof evalFn !== 'function') throw new TypeError('keyturn: evalFn must be a function (script, keys, args) => reply');
    if (typeof prefix !== 'string') throw new TypeError('keyturn: options.prefix must be a string');
    this.#eval = evalFn;
    this.#prefix = prefix;
  }

  async create(key, value) {
    return text(await this.#eval(CREATE, [this.#prefix + key], [value, newVersion()]), 'create');
  }

  async read(key) {
    const reply = await this.#eval(READ, [this.#prefix + key], []);
    if (reply === null || reply === undefined) return null;
    if (!Array.isArray(reply) || reply.length !== 2) throw new TypeError('keyturn: redis answered read with something other than [value, version]');
    return { value: text(reply[0], 'read'), version: text(reply[1], 'read') };
  }

  async replace(key, version, value) {
    return text(await this.#eval(REPLACE, [this.#prefix + key], [version, value, newVersion()]), 'replace');
  }
}
