// The fault harness's TCP proxy (faults/proxy.mjs) in front of a small server on loopback that
// records what it received and answers each line: forwarding, latency, answers lost after the
// server applied the request, a blackhole that stalls then resets, and a failover to another
// server. With redis-server, a lost answer to a lock's create is read back and the acquisition
// still counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect } from 'node:net';

import { FaultProxy } from '../../faults/proxy.mjs';
import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';

/** A line server: records each line it applied, answers `ok <line>`. */
async function lineServer() {
  const applied = [];
  const server = createServer((socket) => {
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk;
      let at;
      while ((at = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, at);
        buffered = buffered.slice(at + 1);
        applied.push(line);
        socket.write(`ok ${line}\n`);
      }
    });
    socket.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { applied, port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** A client connection: `ask(line)` resolves with the answer, or rejects when the connection ends. */
async function client(port) {
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let waiting;
  let buffered = '';
  socket.on('data', (chunk) => {
    buffered += chunk;
    const at = buffered.indexOf('\n');
    if (at !== -1 && waiting) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      waiting.resolve(line);
      waiting = undefined;
    }
  });
  const lost = () => {
    waiting?.reject(new Error('connection closed'));
    waiting = undefined;
  };
  socket.on('close', lost).on('error', lost);
  return {
    socket,
    ask(line) {
      return new Promise((resolve, reject) => {
        waiting = { resolve, reject };
        socket.write(`${line}\n`);
      });
    },
  };
}

test('it forwards, adds latency, loses an answer the server applied, and stalls then resets', async () => {
  const server = await lineServer();
  const proxy = new FaultProxy({ host: '127.0.0.1', port: server.port });
  const port = await proxy.listen();
  try {
    const c = await client(port);
    assert.equal(await c.ask('a'), 'ok a');

    proxy.setLatency(40);
    let started = performance.now();
    assert.equal(await c.ask('b'), 'ok b');
    assert.ok(performance.now() - started >= 75, 'both ways delayed');
    proxy.setLatency(0);

    proxy.loseAnswers(1);
    await assert.rejects(c.ask('write'), /connection closed/);
    assert.deepEqual(server.applied, ['a', 'b', 'write'], 'the server applied it; only its answer was lost');
    assert.equal(proxy.counts.dropped, 1);

    const d = await client(port);
    started = performance.now();
    const stall = proxy.blackhole(150);
    await assert.rejects(d.ask('stalled'), /connection closed/);
    assert.ok(performance.now() - started >= 140, 'nothing passed until the reset');
    await stall;
    assert.ok(!server.applied.includes('stalled'), 'nothing reached the server while stalled');
    const e = await client(port);
    assert.equal(await e.ask('after'), 'ok after', 'new connections pass once it healed');

    // A failover: the open connection is reset, the next one reaches the other server.
    const other = await lineServer();
    try {
      proxy.retarget({ host: '127.0.0.1', port: other.port });
      await assert.rejects(e.ask('to the old one'), /connection closed/);
      const f = await client(port);
      assert.equal(await f.ask('moved'), 'ok moved');
      assert.deepEqual(other.applied, ['moved']);
      assert.ok(!server.applied.includes('to the old one'));
      f.socket.destroy();
    } finally {
      await other.close();
    }
  } finally {
    await proxy.close();
    await server.close();
  }
});


test('over redis-server: a create whose answer was lost is read back, and the acquisition counts', { skip: !haveRedisServer() && 'no redis-server' }, async () => {
  const { createClient } = await import('redis');
  const { RedisStore, acquireLock, lockStats } = await import('keyturn');
  const server = await startRedisServer();
  const redisPort = server.port;
  const proxy = new FaultProxy({ host: '127.0.0.1', port: redisPort });
  const port = await proxy.listen();
  const redis = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: () => 20 } });
  redis.on('error', () => {}); // the connection the proxy drops: node-redis reconnects
  await redis.connect();
  try {
    const store = new RedisStore((script, keys, args) => redis.eval(script, { keys, arguments: args }));
    proxy.loseAnswers(1);
    const lock = await acquireLock(store, 'report', { waitMs: 2000, staleMs: 2000 });
    assert.ok(lock !== undefined, 'held: the create applied, and its read-back showed this holder');
    assert.equal(proxy.counts.dropped, 1);
    const stats = lockStats(store);
    assert.equal(stats.readBacksApplied, 1);
    assert.equal(stats.storeFailures, 1);
    await lock.release();
    const again = await acquireLock(store, 'report', { waitMs: 0 });
    assert.ok(again !== undefined && again.fence > lock.fence, 'released, and the fence rose');
    await again.release();
  } finally {
    await redis.quit().catch(() => {});
    await proxy.close();
    server.stop(); // by PID: only the server this test started
  }
});
