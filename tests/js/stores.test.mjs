// Each store adapter passes the same contract (tests/runtimes/contract.mjs) on its real engine:
// Redis on a real redis-server this test starts on a loopback port and stops by PID. R2Store and
// DurableObjectStore pass it inside workerd, over their real bindings (tests/js/workerd.test.mjs):
// not here through Miniflare's Node-side proxy of the bucket, a path no user's code takes, whose
// own checks failed once under load (two CPU-bound loops beside `make test`) and left this file
// hung until its timeout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';

import { createClient } from 'redis';
import { acquireLock, MemoryStore, RedisStore } from 'keyturn';

import { contract } from '../runtimes/contract.mjs';
import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';
import { until } from './support.mjs';

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

describe('RedisStore replies, over a scripted client', () => {
  // A write's script answers 1 or nil; the store answers the version it sent (the record's
  // first 32 characters), so clients that map integer replies to strings or bigints work too.
  for (const [label, one] of [['a number', 1], ['a string', '1'], ['a bigint', 1n]]) {
    test(`a write answered 1 as ${label} is the version the script was given`, async () => {
      const calls = [];
      const store = new RedisStore(async (script, keys, args) => {
        calls.push({ script, keys, args });
        return one;
      });
      const created = await store.create('a', 'v1');
      assert.match(created, /^[0-9a-f]{32}$/);
      assert.deepEqual(calls[0].keys, ['keyturn-lock:a']);
      assert.deepEqual(calls[0].args, ['v1', created]);
      const replaced = await store.replace('a', created, 'v2');
      assert.deepEqual(calls[1].args, [created, 'v2', replaced]);
      assert.notEqual(replaced, created);
    });
  }

  test('a client that throws instead of rejecting, or a key that cannot be a string, is a rejection, never a throw', async () => {
    const boom = () => {
      throw new Error('client gone');
    };
    for (const store of [new RedisStore(boom), new RedisStore(async () => 1, { evalShaFn: boom })]) {
      for (const call of [() => store.create('a', 'v'), () => store.read('a'), () => store.replace('a', '0'.repeat(32), 'v')]) {
        let promise;
        assert.doesNotThrow(() => {
          promise = call();
        });
        await assert.rejects(promise, /client gone/);
      }
    }
    const store = new RedisStore(async () => 1);
    let promise;
    assert.doesNotThrow(() => {
      promise = store.create(Symbol('key'), 'v');
    });
    await assert.rejects(promise, TypeError);
  });

  test('a write answered nil is refused (null); any other answer is a TypeError', async () => {
    let reply = null;
    const store = new RedisStore(async () => reply);
    assert.equal(await store.create('a', 'v'), null);
    assert.equal(await store.replace('a', '0'.repeat(32), 'v'), null);
    for (const wrong of [0, 2, 'OK', '0123456789abcdef0123456789abcdef', {}]) {
      reply = wrong;
      await assert.rejects(store.create('a', 'v'), (error) => error instanceof TypeError && /redis answered create with .*not 1 or nil/.test(error.message));
      await assert.rejects(store.replace('a', '0'.repeat(32), 'v'), (error) => error instanceof TypeError && /answered replace/.test(error.message));
    }
    // A read answers the record (a string, or bytes) or nil; a number or a short string is not one.
    for (const wrong of [1, {}, 'short']) {
      reply = wrong;
      await assert.rejects(store.read('a'), TypeError);
    }
    reply = new TextEncoder().encode(`${'f'.repeat(32)}{"x":1}`);
    assert.deepEqual(await store.read('a'), { version: 'f'.repeat(32), value: '{"x":1}' });
  });
});

describe('RedisStore with evalShaFn, over a scripted client', () => {
  const sha1 = (text) => createHash('sha1').update(text).digest('hex');

  test('a call names its script by SHA-1, and sends the script only when the server answers NOSCRIPT', async () => {
    const cached = new Map(); // sha → script, as the server's script cache
    const calls = [];
    const reply = (script, args) => (script.startsWith('return') ? null : 1);
    const store = new RedisStore(
      async (script, keys, args) => {
        calls.push(['eval', sha1(script)]);
        cached.set(sha1(script), script);
        return reply(script, args);
      },
      {
        evalShaFn: async (sha, keys, args) => {
          calls.push(['evalSha', sha]);
          if (!cached.has(sha)) throw new Error('NOSCRIPT No matching script. Please use EVAL.');
          return reply(cached.get(sha), args);
        },
      },
    );
    const first = await store.create('a', 'v');
    assert.equal(await store.read('a'), null);
    await store.replace('a', first, 'w');
    const [create, read, replace] = [calls[0][1], calls[2][1], calls[4][1]];
    // Each script once by EVAL after its NOSCRIPT, under the SHA-1 it was named by.
    assert.deepEqual(calls, [['evalSha', create], ['eval', create], ['evalSha', read], ['eval', read], ['evalSha', replace], ['eval', replace]]);
    assert.equal(new Set([create, read, replace]).size, 3);
    calls.length = 0;
    await store.replace('a', first, 'x');
    await store.create('b', 'v');
    await store.read('b');
    assert.deepEqual(calls, [['evalSha', replace], ['evalSha', create], ['evalSha', read]]);
    // A flushed cache: each call falls back once more.
    cached.clear();
    calls.length = 0;
    await store.replace('a', first, 'y');
    await store.replace('a', first, 'z');
    assert.deepEqual(calls, [['evalSha', replace], ['eval', replace], ['evalSha', replace]]);
  });

  test('an EVALSHA failure other than NOSCRIPT is the call\'s failure, not sent again', async () => {
    let evals = 0;
    const store = new RedisStore(
      async () => {
        evals += 1;
        return 1;
      },
      { evalShaFn: async () => Promise.reject(new Error('connection reset')) },
    );
    await assert.rejects(store.create('a', 'v'), /connection reset/);
    await assert.rejects(acquireLock(store, 'a'), (error) => error.name === 'LockStoreError' && /connection reset/.test(error.message));
    assert.equal(evals, 0);
    assert.throws(() => new RedisStore(async () => 1, { evalShaFn: 'evalsha' }), TypeError);
  });
});

const haveRedis = haveRedisServer();

describe('RedisStore on redis-server', { skip: !haveRedis && 'no redis-server' }, () => {
  let server;
  let port;
  const clients = [];
  before(async () => {
    server = await startRedisServer();
    port = server.port;
  });
  after(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    server?.stop(); // by PID: only the server this test started
  });
  /** A client of the test's server, quit at the end. */
  const connected = async () => {
    const client = createClient({ url: `redis://127.0.0.1:${port}` });
    await client.connect();
    clients.push(client);
    return client;
  };
  const evalOf = (client) => (script, keys, args) => client.eval(script, { keys, arguments: args });
  const evalShaOf = (client) => (sha, keys, args) => client.evalSha(sha, { keys, arguments: args });

  storeContract('RedisStore', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) stores.push(new RedisStore(evalOf(await connected())));
    return stores;
  });

  // Half the stores by EVALSHA, half by EVAL, the server's script cache flushed first: the
  // first EVALSHA of each script meets NOSCRIPT.
  storeContract('RedisStore with evalShaFn', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) {
      const client = await connected();
      if (i === 0) await client.scriptFlush();
      stores.push(new RedisStore(evalOf(client), i % 2 === 0 ? { evalShaFn: evalShaOf(client) } : {}));
    }
    return stores;
  });

  /** node-redis's subscribe, as the README shows it: a duplicate connection for subscriptions. */
  const subscribeOf = async (client) => {
    const subscriber = client.duplicate();
    await subscriber.connect();
    clients.push(subscriber);
    return async (channel, onMessage) => {
      await subscriber.subscribe(channel, onMessage);
      return () => subscriber.unsubscribe(channel, onMessage);
    };
  };

  storeContract('RedisStore with subscribe', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) {
      const client = await connected();
      stores.push(new RedisStore(evalOf(client), { subscribe: await subscribeOf(client), prefix: 'contract-changed:' }));
    }
    return stores;
  });

  test('RedisStore with subscribe: changed answers at the next write, and a write publishes only while someone waits', async () => {
    const client = await connected();
    const store = new RedisStore(evalOf(client), { subscribe: await subscribeOf(client), prefix: 'changed-test:' });
    assert.equal(typeof new RedisStore(evalOf(client)).changed, 'undefined', 'no subscribe, no changed: the lock polls');
    assert.equal(await store.changed('k', null, 20), false);
    const version = await store.create('k', 'v');
    assert.equal(await store.changed('k', null, 20), true, 'it exists');
    const waiting = store.changed('k', version, 5000);
    // Its subscription, then its unsubscription, reach the server a round trip later: looked
    // for until they did (2 s at most), not after a guess of how long a round trip takes.
    const subscribers = () => client.sendCommand(['PUBSUB', 'NUMSUB', 'changed-test:k']).then((reply) => Number(reply[1]));
    assert.equal(await until(async () => (await subscribers()) === 1), true, 'subscribed while it waits');
    const started = performance.now();
    assert.ok(await store.replace('k', version, 'w'));
    assert.equal(await waiting, true);
    assert.ok(performance.now() - started < 1000, 'told by the write');
    assert.equal(await until(async () => (await subscribers()) === 0), true, 'unsubscribed');
    assert.throws(() => new RedisStore(evalOf(client), { subscribe: 1 }), TypeError);
  });

  test('two package instances over redis-server with subscribe: the waiter is woken by the release, not by polling', async () => {
    const [a, b] = [await connected(), await connected()];
    const storeA = new RedisStore(evalOf(a), { subscribe: await subscribeOf(a), prefix: 'handoff-test:' });
    const storeB = new RedisStore(evalOf(b), { subscribe: await subscribeOf(b), prefix: 'handoff-test:' });
    const other = createRequire(import.meta.url)('keyturn');
    for (let i = 0; i < 5; i++) {
      const before = other.lockStats(storeB).storeCalls;
      const held = await acquireLock(storeA, `k${i}`);
      const asked = other.acquireLock(storeB, `k${i}`, { waitMs: 2000 });
      // B's four calls (below) are round trips to the server: waited for (2 s at most), then
      // 300 ms more, in which a poller would have read again a dozen times.
      await until(() => other.lockStats(storeB).storeCalls - before >= 4);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const callsWhileHeld = other.lockStats(storeB).storeCalls - before;
      await held.release();
      const lock = await asked;
      assert.ok(lock !== undefined && lock.fence > held.fence);
      // Create (refused), read, its ask, one watch over the 300 ms: no polls.
      assert.equal(callsWhileHeld, 4, `cycle ${i}: ${callsWhileHeld} calls`);
      await lock.release();
    }
  });

  test('RedisStore with evalShaFn sends a script again after SCRIPT FLUSH', async () => {
    const client = await connected();
    let evals = 0;
    const store = new RedisStore(
      (script, keys, args) => {
        evals += 1;
        return evalOf(client)(script, keys, args);
      },
      { evalShaFn: evalShaOf(client), prefix: 'flush-test:' },
    );
    for (let i = 0; i < 3; i++) {
      const lock = await acquireLock(store, 'f');
      await lock.release();
    }
    const before = evals;
    assert.ok(before <= 2, `only the first create and replace are sent (${before})`);
    await client.scriptFlush();
    const lock = await acquireLock(store, 'f');
    assert.ok(lock.fence > 3);
    await lock.release();
    assert.equal(evals, before + 1, 'the replace is sent once more after the flush');
  });
});
