// Each store adapter passes the same contract (tests/runtimes/contract.mjs) on its real engine:
// R2 through Miniflare's binding into workerd, Redis on a real redis-server this test starts on
// a loopback port and stops by PID. (tests/js/workerd.test.mjs runs it inside workerd too.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { Miniflare } from 'miniflare';
import { createClient } from 'redis';
import { acquireLock, MemoryStore, R2Store, RedisStore } from 'keyturn';

import { contract } from '../runtimes/contract.mjs';

/** The contract over `stores` (store objects over one backend), taken in turn. */
function storeContract(label, makeStores) {
  test(`${label} passes the store contract`, async () => {
    const stores = await makeStores(4);
    let next = 0;
    assert.deepEqual(await contract(() => stores[next++ % stores.length], acquireLock), []);
  });
}

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));

describe('MemoryStore', () => {
  const store = new MemoryStore();
  storeContract('MemoryStore', async (n) => Array.from({ length: n }, () => store));
});

describe('R2Store in workerd (Miniflare)', () => {
  let mf;
  let bucket;
  before(async () => {
    mf = new Miniflare({
      modules: true,
      compatibilityDate: '2025-09-01',
      cf: false,
      script: 'export default { fetch() { return new Response(null, { status: 404 }); } }',
      r2Buckets: ['LOCKS'],
    });
    bucket = await mf.getR2Bucket('LOCKS');
  });
  after(() => mf?.dispose());
  storeContract('R2Store', async (n) => Array.from({ length: n }, () => new R2Store(bucket)));
});

const haveRedis = spawnSync('redis-server', ['--version']).status === 0;

describe('RedisStore on redis-server', { skip: !haveRedis && 'no redis-server' }, () => {
  let server;
  let port;
  const clients = [];
  before(async () => {
    port = await new Promise((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address();
        probe.close(() => resolve(free));
      });
    });
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      const ping = spawnSync('redis-cli', ['-p', String(port), 'ping']);
      if (String(ping.stdout).trim() === 'PONG') break;
      await sleep(50);
    }
  });
  after(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    server?.kill('SIGTERM'); // by PID: only the server this test started
  });
  storeContract('RedisStore', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) {
      const client = createClient({ url: `redis://127.0.0.1:${port}` });
      await client.connect();
      clients.push(client);
      stores.push(new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args })));
    }
    return stores;
  });
});
