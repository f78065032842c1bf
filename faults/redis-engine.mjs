// The fault harness's Redis engine: a redis-server of its own for the lock records, another for
// the fenced counters (what the checker reads must outlive the store's faults), and in front of
// them two TCP proxies per client slot (faults/proxy.mjs) for the faults of the network:
// latency, answers lost after the server applied the write, blackholes past the lease. Its store
// faults lose what the lock records said: the server killed and started again without
// persistence, a failover to a replica that missed the last writes, a record evicted.
import { fileURLToPath } from 'node:url';

import { createClient } from 'redis';

import { startRedisServer } from '../tests/runtimes/redis-server.mjs';
import { ClientProxies, FaultProxy } from './proxy.mjs';

const clientScript = fileURLToPath(new URL('./redis-client-process.mjs', import.meta.url));
const PREFIX = 'keyturn-lock:'; // RedisStore's default

// Deletes the record only if it still holds what was read: an eviction takes an idle key.
const DELETE_IF_UNCHANGED = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * `track(pid, command)` registers each server started, for the harness to stop by its PID. A
 * store fault keeps the store away for more than `maxClockSkewMs` after it lost data, and evicts
 * only a record idle for that long: the conditions under which the lock promises fences above
 * every one before a loss (docs/guarantees.md, "What the lock promises").
 */
export async function startRedisEngine({ lease, sleep, track }) {
  let locks = await startRedisServer();
  const counters = await startRedisServer();
  for (const server of [locks, counters]) track(server.process.pid, 'redis-server');
  const target = ({ port }) => ({ host: '127.0.0.1', port });
  const proxies = new ClientProxies(clientScript, () => target(locks), () => target(counters));
  const admin = (server) => {
    const client = createClient({ url: `redis://127.0.0.1:${server.port}`, socket: { reconnectStrategy: false } });
    client.on('error', () => {});
    return client.connect();
  };
  const awayMs = lease.maxClockSkewMs + 20;
  /** The lock records' server killed, and the store kept away for longer than the clock bound. */
  const killLocks = async () => {
    locks.stop('SIGKILL');
    await locks.exited;
    await sleep(awayMs);
  };
  return {
    name: 'redis',
    client: (slot) => proxies.client(slot),
    faults: {
      async 'latency 0–200 ms'() {
        for (const proxy of proxies.all()) proxy.setLatency(0, 200);
        await sleep(lease.staleMs);
        for (const proxy of proxies.all()) proxy.setLatency(0);
      },
      async 'answer lost after it applied'(slot) {
        for (const proxy of proxies.of(slot)) proxy.loseAnswers(1);
        await sleep(lease.staleMs / 2);
      },
      async 'blackhole past the lease'(slot) {
        await Promise.all(proxies.of(slot).map((proxy) => proxy.blackhole(lease.staleMs * 1.5)));
      },
    },
    storeFaults: {
      async 'restarted without persistence'() {
        await killLocks();
        locks = await startRedisServer({ port: locks.port });
        track(locks.process.pid, 'redis-server');
      },
      async 'failover, last writes missed'() {
        // A replica of the server through a link of its own, synced, then cut off: the writes
        // after the cut reach the old primary only, which dies; the replica is promoted and
        // every client is sent to it.
        const link = new FaultProxy(target(locks));
        const linkPort = await link.listen();
        const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(linkPort)] });
        track(replica.process.pid, 'redis-server');
        const promoted = await admin(replica);
        for (let i = 0; i < 250 && !(await promoted.info('replication')).includes('master_link_status:up'); i++) await sleep(10);
        await sleep(50); // the writes of these milliseconds reach both
        await link.close();
        await sleep(200); // and these the old primary only
        await killLocks();
        await promoted.sendCommand(['REPLICAOF', 'NO', 'ONE']);
        await promoted.quit();
        locks = replica;
        proxies.retargetLocks();
      },
      async 'record evicted'() {
        // As an eviction would: a record left unchanged for a while (the least recently used).
        const redis = await admin(locks);
        const seen = new Map(); // key → [value, since]
        for (let evicted = false; !evicted; await sleep(2)) {
          const keys = await redis.keys(`${PREFIX}*`);
          const values = keys.length === 0 ? [] : await redis.mGet(keys);
          for (const [i, key] of keys.entries()) {
            const [value, since] = seen.get(key) ?? [];
            if (value !== values[i]) seen.set(key, [values[i], performance.now()]);
            else if (value !== null && performance.now() - since >= awayMs) {
              evicted = (await redis.eval(DELETE_IF_UNCHANGED, { keys: [key], arguments: [value] })) === 1;
              if (evicted) break;
            }
          }
        }
        await redis.quit();
      },
    },
    async finals(resources) {
      const redis = await admin(counters);
      const finals = [];
      for (const resource of resources) {
        const value = Number((await redis.hGet(resource, 'value')) ?? 0);
        const accepted = (await redis.lRange(`${resource}:accepted`, 0, -1)).map((entry) => {
          const [fence, token] = entry.split(' ');
          return { fence: Number(fence), token };
        });
        finals.push({ resource, value, accepted });
      }
      await redis.quit();
      return finals;
    },
    async stop() {
      await proxies.close();
      locks.stop('SIGKILL');
      counters.stop('SIGKILL');
    },
  };
}
