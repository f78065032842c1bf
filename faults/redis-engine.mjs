// The fault harness's Redis engine: a redis-server of its own, and in front of it one TCP proxy
// per client slot (faults/proxy.mjs) for the faults of the network: latency, answers lost after
// the server applied the write, blackholes past the lease.
import { fileURLToPath } from 'node:url';

import { createClient } from 'redis';

import { startRedisServer } from '../tests/runtimes/redis-server.mjs';
import { FaultProxy } from './proxy.mjs';

const clientScript = fileURLToPath(new URL('./redis-client-process.mjs', import.meta.url));

export async function startRedisEngine({ lease, sleep }) {
  const server = await startRedisServer();
  const proxies = []; // per client slot: a reborn client keeps its slot's proxy
  return {
    name: 'redis',
    pids: [[server.process.pid, 'redis-server']],
    async client(slot) {
      proxies[slot] ??= { proxy: new FaultProxy({ host: '127.0.0.1', port: server.port }) };
      proxies[slot].port ??= await proxies[slot].proxy.listen();
      return { script: clientScript, config: { port: proxies[slot].port } };
    },
    faults: {
      async 'latency 0–200 ms'() {
        for (const { proxy } of proxies) proxy.setLatency(0, 200);
        await sleep(lease.staleMs);
        for (const { proxy } of proxies) proxy.setLatency(0);
      },
      async 'answer lost after it applied'(slot) {
        proxies[slot].proxy.loseAnswers(1);
        await sleep(lease.staleMs / 2);
      },
      async 'blackhole past the lease'(slot) {
        await proxies[slot].proxy.blackhole(lease.staleMs * 1.5);
      },
    },
    async finals(resources) {
      const redis = await createClient({ url: `redis://127.0.0.1:${server.port}` }).connect();
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
      for (const { proxy } of proxies) await proxy.close();
      server.process.kill('SIGKILL');
    },
  };
}
