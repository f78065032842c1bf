// One client process of the fault harness: its own keyturn instance over Redis (through its
// own FaultProxy), contending on a few names with `withLock` or with the serializer over a
// store, each turn a fenced increment of the name's counter. It prints its history as JSON
// lines (see checker.mjs) until SIGTERM.
//
//   node faults/client.mjs '<config JSON>'
import { createClient } from 'redis';
import { RedisStore, createKeyedSerializer, withLock } from 'keyturn';

const config = JSON.parse(process.argv[2]);
const { id, port, names, mode, skewMs, staleMs, waitMs, storeTimeoutMs, plant } = config;
// A planted bug, for the harness's self-test: `skew`, a takeover that ignores skew (this client
// assumes clocks agree); `cas`, a store whose compare-and-set ignores the version, so a release
// or a renewal overwrites whatever record is there.
const maxClockSkewMs = plant === 'skew' ? 0 : config.maxClockSkewMs;

/** Real time on the machine's shared clock, whatever this client's `now` says. */
// CLOCK_MONOTONIC: one clock for every process on the machine (performance.timeOrigin is each
// process's own estimate, and differs between processes by a fraction of a millisecond).
const real = () => Number(process.hrtime.bigint()) / 1e6;
const now = () => Date.now() + skewMs;
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

process.on('unhandledRejection', (reason) => emit({ kind: 'crash', client: id, detail: `unhandled rejection: ${reason?.stack ?? reason}` }));

// A write the resource refuses below the highest fence it accepted; it logs what it accepts.
const FENCED_INCREMENT = `
local highest = tonumber(redis.call('HGET', KEYS[1], 'fence') or '-1')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'value', 1)
redis.call('RPUSH', KEYS[1] .. ':accepted', ARGV[1] .. ' ' .. ARGV[2])
return 1`;

const redis = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: () => 20, connectTimeout: 1000 } });
redis.on('error', () => {}); // connections the nemesis drops: node-redis reconnects
await redis.connect();
const redisStore = new RedisStore((script, keys, args) => redis.eval(script, { keys, arguments: args }));
const store = plant !== 'cas' ? redisStore : {
  create: (key, value) => redisStore.create(key, value),
  read: (key) => redisStore.read(key),
  async replace(key, version, value) {
    const current = await redisStore.read(key);
    return current === null ? null : redisStore.replace(key, current.version, value);
  },
};
const lease = { staleMs, maxClockSkewMs, storeTimeoutMs, now };
// The serializer takes no `now`: its records carry the machine's clock (a serializer client has skew 0).
const serialize = mode === 'serializer' ? createKeyedSerializer({ staleMs, maxClockSkewMs, storeTimeoutMs, store, timeoutMs: waitMs + staleMs }) : undefined;

/** The fenced increment of `name`'s counter, with its outcome in the history. */
async function write(name, fence, token) {
  let outcome;
  try {
    outcome = (await redis.eval(FENCED_INCREMENT, { keys: [`counter:${name}`], arguments: [String(fence), token] })) === 1 ? 'ok' : 'refused';
  } catch {
    outcome = 'info'; // its answer was lost: it may or may not have applied
  }
  emit({ kind: 'write', client: id, resource: `counter:${name}`, token, fence, outcome });
}

async function turn(name) {
  const asked = real();
  if (serialize !== undefined) {
    // Its turns hold the lease named `SERIALIZE_PREFIX + name`: fences of their own, and a
    // counter of their own. A turn's lease is not visible here, so turns are judged by fences.
    const resource = `turns:${name}`;
    await serialize(name, async (signal, { fence }) => {
      const at = real();
      const token = `${id}/${fence}`;
      emit({ kind: 'acquired', client: id, name: resource, token, fence, at, heldUntil: at, waitedMs: at - asked });
      await write(resource, fence, token);
    });
    return;
  }
  await withLock(store, name, async (lock) => {
    const at = real();
    emit({ kind: 'acquired', client: id, name, token: lock.token, fence: lock.fence, at, heldUntil: at + (lock.heldUntil - now()), waitedMs: at - asked });
    await write(name, lock.fence, lock.token);
    emit({ kind: 'released', client: id, name, token: lock.token, at: real() });
  }, { ...lease, waitMs });
}

let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});
let ops = 0;
while (!stopping) {
  const name = names[ops++ % names.length];
  try {
    await turn(name);
  } catch (error) {
    emit({ kind: 'failed', client: id, name, error: error?.name ?? String(error) });
  }
  // A client thinks between turns, as a service between requests: the lock promises no
  // fairness across isolates, and clients in a tight loop could keep another out for good.
  await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 25));
}
await redis.quit().catch(() => {});
process.exit(0);
