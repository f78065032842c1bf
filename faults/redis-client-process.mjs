// One client process of the fault harness: its own keyturn instance over Redis (through its
// own FaultProxy; woken by the store's `changed` through a subscription), contending on a few
// names with `withLock` or with the serializer over a store, each turn a fenced increment of
// the name's counter (on a server of its own, through a proxy of its own). It prints its history
// as JSON lines (see checker.mjs), the first saying it is ready, until SIGTERM. `keyturn` in
// the config is the package to load, when not the repository's (a planted bug's build).
//
//   node faults/redis-client-process.mjs '<config JSON>'
import { createClient } from 'redis';

import { clientStore, makeSerializer, makeTurn, runCallers } from './turn.mjs';

const config = JSON.parse(process.argv[2]);
const { id, port, countersPort, names, skewMs } = config;
const { RedisStore, SERIALIZE_PREFIX, createKeyedSerializer, withLock } = await import(config.keyturn ?? 'keyturn');

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

const connect = async (to) => {
  const client = createClient({ url: `redis://127.0.0.1:${to}`, socket: { reconnectStrategy: () => 20, connectTimeout: 1000 } });
  client.on('error', () => {}); // connections the nemesis drops: node-redis reconnects
  return client.connect();
};
const redis = await connect(port);
const counters = await connect(countersPort);
// Wake-ups: a connection of its own for subscriptions, through the same proxy and its faults.
const subscriber = redis.duplicate();
subscriber.on('error', () => {});
await subscriber.connect();
const subscribe = async (channel, onMessage) => {
  await subscriber.subscribe(channel, onMessage);
  return () => subscriber.unsubscribe(channel, onMessage);
};
emit({ kind: 'ready', client: id, pids: [] });
const redisStore = new RedisStore((script, keys, args) => redis.eval(script, { keys, arguments: args }), { subscribe });
const store = clientStore(redisStore, config, { emit, real, serializePrefix: SERIALIZE_PREFIX });
const api = { withLock, createKeyedSerializer };

/** The fenced increment of a counter: 'ok', 'refused', or 'info' when its answer was lost. */
async function write(resource, fence, token) {
  try {
    return (await counters.eval(FENCED_INCREMENT, { keys: [resource], arguments: [String(fence), token] })) === 1 ? 'ok' : 'refused';
  } catch {
    return 'info'; // it may or may not have applied
  }
}

const turn = makeTurn({ api, store, serialize: makeSerializer(api, store, config), write, real, now, emit, config });

await runCallers(turn, names, { id, emit, inFlight: config.inFlight, paced: config.paced });
// A connection the nemesis left reconnecting may never finish quitting: no longer than a moment.
await Promise.race([Promise.allSettled([redis.quit(), counters.quit(), subscriber.quit()]), new Promise((resolve) => setTimeout(resolve, 500))]);
process.exit(0);
