// DynamoDbStore: its requests and its reading of answers over a scripted client (what it sends,
// a failed condition as null, every other failure and every answer that is not DynamoDB's a
// rejection — a LockStoreError through the lock — never a throw, names checked), then on a
// dynalite server this test starts on a loopback port and stops by its PID: setup(), the store
// contract (tests/runtimes/contract.mjs), an item that is not the store's, and docs/stores.md's
// example as written. Across processes: tests/js/dynamodb-cross-process.test.mjs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';

import { acquireLock, DynamoDbStore, LockStoreError } from 'keyturn';

import { contract } from '../runtimes/contract.mjs';
import { createTable, dynamoClient, haveDynalite, startDynalite } from '../runtimes/dynalite-server.mjs';

const root = new URL('../..', import.meta.url).pathname;

/** DynamoDB's error for a failed condition, as the SDK makes it: `name`, and how often it sent. */
function conditionFailed(attempts = 1) {
  const error = new Error('The conditional request failed');
  error.name = 'ConditionalCheckFailedException';
  error.$metadata = { httpStatusCode: 400, attempts };
  return error;
}

/** A client whose every call is recorded and answered by `answer(method, input)`. */
function scripted(answer) {
  const calls = [];
  const call = (method) => (input) => {
    calls.push({ method, input });
    return answer(method, input);
  };
  return { calls, client: { putItem: call('putItem'), getItem: call('getItem'), describeTable: call('describeTable'), createTable: call('createTable') } };
}

describe('DynamoDbStore over a scripted client', () => {
  test('create and replace are one conditional PutItem each, read one consistent GetItem; names and values go as parameters', async () => {
    const { calls, client } = scripted(async (method) => (method === 'getItem' ? { Item: { lockName: { S: 'a"b' }, value: { S: 'v1' }, version: { S: 'x1' } } } : {}));
    const store = new DynamoDbStore(client, { table: 'my.locks-1', keyAttribute: 'lockName' });
    assert.equal(calls.length, 0, 'construction makes no request');
    const created = await store.create('a"b', '{"v":1}');
    assert.match(created, /^[0-9a-f]{32}$/);
    const replaced = await store.replace('a"b', created, '{"v":2}');
    assert.match(replaced, /^[0-9a-f]{32}$/);
    assert.notEqual(replaced, created);
    assert.deepEqual(await store.read('a"b'), { value: 'v1', version: 'x1' });
    assert.deepEqual(calls, [
      {
        method: 'putItem',
        input: {
          TableName: 'my.locks-1',
          Item: { lockName: { S: 'a"b' }, value: { S: '{"v":1}' }, version: { S: created } },
          ConditionExpression: 'attribute_not_exists(#k)',
          ExpressionAttributeNames: { '#k': 'lockName' },
          ExpressionAttributeValues: undefined,
        },
      },
      {
        method: 'putItem',
        input: {
          TableName: 'my.locks-1',
          Item: { lockName: { S: 'a"b' }, value: { S: '{"v":2}' }, version: { S: replaced } },
          ConditionExpression: '#ver = :ver',
          ExpressionAttributeNames: { '#ver': 'version' },
          ExpressionAttributeValues: { ':ver': { S: created } },
        },
      },
      { method: 'getItem', input: { TableName: 'my.locks-1', Key: { lockName: { S: 'a"b' } }, ConsistentRead: true } },
    ]);
    // No version repeats, across store objects either.
    const other = new DynamoDbStore(client, { table: 'my.locks-1' });
    const versions = new Set([created, replaced]);
    for (let i = 0; i < 50; i++) versions.add(await (i % 2 ? store : other).create('k', 'v'));
    assert.equal(versions.size, 52);
  });

  test('a failed condition is null; sent more than once by the SDK, a consistent read tells whether an earlier attempt applied it', async () => {
    let attempts = 1;
    let apply = false;
    let stands; // the version the item holds
    const { calls, client } = scripted(async (method, input) => {
      if (method === 'getItem') return stands === undefined ? {} : { Item: { pk: { S: 'a' }, value: { S: 'v' }, version: { S: stands } } };
      // The retried request: its first attempt applied (when `apply`), the last failed the condition.
      if (apply) stands = input.Item.version.S;
      throw conditionFailed(attempts);
    });
    const store = new DynamoDbStore(client, { table: 'locks' });
    assert.equal(await store.create('a', 'v'), null);
    assert.equal(await store.replace('a', '0'.repeat(32), 'v'), null);
    // A failed condition without $metadata (another client's error) is the null answer too.
    attempts = undefined;
    assert.equal(await store.create('a', 'v'), null);
    assert.equal(calls.filter((call) => call.method === 'getItem').length, 0, 'no read after a request sent once');
    attempts = 2;
    // Its own write stands: the write's version.
    apply = true;
    const created = await store.create('a', 'v');
    assert.equal(created, stands);
    const replaced = await store.replace('a', created, 'w');
    assert.equal(replaced, stands);
    assert.notEqual(replaced, created);
    assert.deepEqual(calls.at(-1), { method: 'getItem', input: { TableName: 'locks', Key: { pk: { S: 'a' } }, ConsistentRead: true } });
    // Another write stands, or none: null.
    apply = false;
    assert.equal(await store.create('a', 'v'), null);
    assert.equal(await store.replace('a', replaced, 'x'), null);
    stands = undefined;
    assert.equal(await store.replace('a', replaced, 'x'), null);
  });

  test('a missing item is null; an item without the string attributes value and version is not the store\'s: a rejection, a LockStoreError through the lock', async () => {
    let item;
    // Every write finds an item (its condition fails): a lock reads it.
    const { client } = scripted(async (method) => {
      if (method === 'getItem') return { Item: item };
      throw conditionFailed();
    });
    const store = new DynamoDbStore(client, { table: 'locks' });
    assert.equal(await store.read('a'), null);
    item = null;
    assert.equal(await store.read('a'), null);
    for (const foreign of [
      { pk: { S: 'a' }, data: { S: 'the app\'s' } },
      { pk: { S: 'a' }, value: { S: '{}' } },
      { pk: { S: 'a' }, value: { N: '1' }, version: { S: 'x' } },
      { pk: { S: 'a' }, value: { S: '{}' }, version: { B: new Uint8Array(1) } },
      { pk: { S: 'a' }, value: null, version: { S: 'x' } },
    ]) {
      item = foreign;
      await assert.rejects(store.read('a'), (error) => error instanceof TypeError && /not a DynamoDbStore record/.test(error.message));
      await assert.rejects(acquireLock(store, 'a'), (error) => error instanceof LockStoreError && error.cause instanceof TypeError);
    }
  });

  test('an answer that is not DynamoDB\'s is a rejection (a TypeError), a LockStoreError through the lock', async () => {
    let reply;
    const { client } = scripted(async () => reply);
    const store = new DynamoDbStore(client, { table: 'locks' });
    for (const wrong of [undefined, null, 'OK', 1]) {
      reply = wrong;
      await assert.rejects(store.create('a', 'v'), (error) => error instanceof TypeError && /answered putItem/.test(error.message));
      await assert.rejects(store.replace('a', 'x', 'v'), (error) => error instanceof TypeError && /answered putItem/.test(error.message));
      await assert.rejects(acquireLock(store, 'a'), (error) => error instanceof LockStoreError && /answered putItem/.test(error.message));
    }
    for (const wrong of [null, 'item', 1, { Item: 'item' }, { Item: 7 }]) {
      reply = wrong;
      await assert.rejects(store.read('a'), (error) => error instanceof TypeError && /answered getItem/.test(error.message));
    }
    // A client that answers a plain value, not a promise, is heard as one.
    const plain = new DynamoDbStore({ putItem: () => ({}), getItem: () => ({}) }, { table: 'locks' });
    assert.match(await plain.create('a', 'v'), /^[0-9a-f]{32}$/);
    assert.equal(await plain.read('a'), null);
  });

  test('a client that throws, or rejects, is a rejection, never a throw: a LockStoreError with its error as cause through the lock', async () => {
    const gone = new Error('socket hang up');
    for (const client of [
      { putItem: () => { throw gone; }, getItem: () => { throw gone; } },
      { putItem: async () => { throw gone; }, getItem: async () => { throw gone; } },
    ]) {
      const store = new DynamoDbStore(client, { table: 'locks' });
      for (const call of [() => store.create('a', 'v'), () => store.read('a'), () => store.replace('a', 'x', 'v')]) {
        let promise;
        assert.doesNotThrow(() => {
          promise = call();
        });
        await assert.rejects(promise, (error) => error === gone);
      }
      await assert.rejects(acquireLock(store, 'a'), (error) => error instanceof LockStoreError && error.cause === gone);
    }
    // DynamoDB's own failures are failures too, never a busy lock: a throttled request, a missing table.
    for (const name of ['ProvisionedThroughputExceededException', 'ResourceNotFoundException', 'ValidationException']) {
      const error = Object.assign(new Error(name), { name, $metadata: { attempts: 1 } });
      const store = new DynamoDbStore({ putItem: async () => { throw error; }, getItem: async () => ({}) }, { table: 'locks' });
      await assert.rejects(acquireLock(store, 'a'), (thrown) => thrown instanceof LockStoreError && thrown.cause === error);
    }
  });

  test('bad clients, options, table and attribute names are refused at construction, naming what is wrong', () => {
    const client = { putItem: async () => ({}), getItem: async () => ({}) };
    assert.throws(() => new DynamoDbStore(undefined, { table: 'locks' }), (error) => error instanceof TypeError && /client/.test(error.message));
    // DynamoDBClient has only `send`; the document client has `put` and `get`.
    for (const wrong of [{ send() {} }, { put() {}, get() {} }]) {
      assert.throws(() => new DynamoDbStore(wrong, { table: 'locks' }), (error) => error instanceof TypeError && /aggregated DynamoDB client/.test(error.message));
    }
    assert.throws(() => new DynamoDbStore(client), (error) => error instanceof TypeError && /options/.test(error.message));
    assert.throws(() => new DynamoDbStore(client, {}), (error) => error instanceof TypeError && /options\.table/.test(error.message));
    assert.throws(() => new DynamoDbStore(client, { table: 'locks', tableName: 'x' }), (error) => error instanceof TypeError && /tableName/.test(error.message));
    assert.throws(() => new DynamoDbStore(client, { table: 42 }), (error) => error instanceof TypeError && /options\.table/.test(error.message));
    for (const table of ['', 'ab', 'a b', 'locks;drop', 'lö', 'x'.repeat(256), 'locks\n']) {
      assert.throws(() => new DynamoDbStore(client, { table }), (error) => error instanceof RangeError && /options\.table/.test(error.message), table);
    }
    assert.throws(() => new DynamoDbStore(client, { table: 'locks', keyAttribute: 1 }), (error) => error instanceof TypeError && /options\.keyAttribute/.test(error.message));
    for (const keyAttribute of ['', '1pk', 'p k', '#k', ':k', 'pk)', 'a.b', 'x'.repeat(256), 'value', 'version']) {
      assert.throws(() => new DynamoDbStore(client, { table: 'locks', keyAttribute }), (error) => error instanceof RangeError && /options\.keyAttribute/.test(error.message), keyAttribute);
    }
    for (const [table, keyAttribute] of [['abc', 'pk'], ['x'.repeat(255), '_'], ['A_b.c-1', 'lock_name_2']]) {
      assert.doesNotThrow(() => new DynamoDbStore(client, { table, keyAttribute }));
    }
  });

  test('setup() without describeTable and createTable rejects with a TypeError', async () => {
    const store = new DynamoDbStore({ putItem: async () => ({}), getItem: async () => ({}) }, { table: 'locks' });
    await assert.rejects(store.setup(), (error) => error instanceof TypeError && /describeTable and createTable/.test(error.message));
  });
});

describe('DynamoDbStore on dynalite', { skip: !haveDynalite() && 'no dynalite (npm ci installs it)' }, () => {
  let server;
  let client;
  before(async () => {
    server = await startDynalite();
    client = await dynamoClient(server.endpoint);
  });
  after(() => server?.stop()); // by PID: only the server this test started

  test('before setup() a lock fails with a LockStoreError (no table); setup() creates the table, waits until ACTIVE, and is idempotent, from several callers at once', async () => {
    const store = new DynamoDbStore(client, { table: 'set-up' });
    await assert.rejects(acquireLock(store, 'a'), (error) => error instanceof LockStoreError && error.cause?.name === 'ResourceNotFoundException');
    // Tables stay CREATING for 500 ms on dynalite: the callers wait that out.
    const started = performance.now();
    await Promise.all([store.setup(), store.setup(), new DynamoDbStore(await dynamoClient(server.endpoint), { table: 'set-up' }).setup()]);
    const ms = performance.now() - started;
    const { Table } = await client.describeTable({ TableName: 'set-up' });
    assert.equal(Table.TableStatus, 'ACTIVE');
    assert.ok(ms >= 400, `ready after ${ms.toFixed(0)} ms, once ACTIVE`);
    assert.deepEqual(Table.KeySchema, [{ AttributeName: 'pk', KeyType: 'HASH' }]);
    assert.deepEqual(Table.AttributeDefinitions, [{ AttributeName: 'pk', AttributeType: 'S' }]);
    assert.equal(Table.BillingModeSummary?.BillingMode, 'PAY_PER_REQUEST');
    await store.setup();
    const lock = await acquireLock(store, 'a');
    assert.ok(lock.fence > 0);
    await lock.release();
    // Another keyAttribute: a table of its own, set up the same way.
    const named = new DynamoDbStore(client, { table: 'named', keyAttribute: 'lock_name' });
    await named.setup();
    assert.deepEqual((await client.describeTable({ TableName: 'named' })).Table.KeySchema, [{ AttributeName: 'lock_name', KeyType: 'HASH' }]);
    const held = await acquireLock(named, 'b');
    const { Item } = await client.getItem({ TableName: 'named', Key: { lock_name: { S: 'b' } }, ConsistentRead: true });
    assert.equal(JSON.parse(Item.value.S).fence, held.fence);
    await held.release();
  });

  test('setup() on a table whose key is another is a LockStoreError that names it', async () => {
    await createTable(client, 'other-key', 'id');
    const store = new DynamoDbStore(client, { table: 'other-key' });
    await assert.rejects(store.setup(), (error) => error instanceof LockStoreError && /key id \(HASH\)/.test(error.message) && /partition key pk/.test(error.message));
    // Its calls fail (the key is not the table's), never a busy lock.
    await assert.rejects(acquireLock(store, 'a'), (error) => error instanceof LockStoreError && error.cause?.name === 'ValidationException');
  });

  describe('on one table', () => {
    const TABLE = 'keyturn-locks';
    before(() => createTable(client, TABLE));

    test('DynamoDbStore passes the store contract (four store objects, each with its own client)', async () => {
      const stores = [];
      for (let i = 0; i < 4; i++) stores.push(new DynamoDbStore(await dynamoClient(server.endpoint), { table: TABLE }));
      let next = 0;
      assert.deepEqual(await contract(() => stores[next++ % stores.length], acquireLock), []);
    });

    test('an item at a lock\'s name that is not the store\'s is never overwritten, taken over or released', async () => {
      const store = new DynamoDbStore(client, { table: TABLE });
      const theApps = { pk: { S: 'account-7' }, balance: { N: '100' } };
      await client.putItem({ TableName: TABLE, Item: theApps });
      await assert.rejects(acquireLock(store, 'account-7', { staleMs: 50 }), LockStoreError);
      // Past any lease it might have been taken for.
      await new Promise((resolve) => setTimeout(resolve, 100));
      await assert.rejects(acquireLock(store, 'account-7', { staleMs: 50 }), LockStoreError);
      const item = async () => (await client.getItem({ TableName: TABLE, Key: { pk: { S: 'account-7' } }, ConsistentRead: true })).Item;
      assert.deepEqual(await item(), theApps);
      // A holder whose record the app overwrote: its release leaves the app's item as it is.
      const lock = await acquireLock(store, 'account-8');
      const overwritten = { pk: { S: 'account-8' }, balance: { N: '5' } };
      await client.putItem({ TableName: TABLE, Item: overwritten });
      // Its renewal's condition fails; it may read the item to see whose it is, and that read fails.
      await lock.renew().then((renewed) => assert.equal(renewed, false), (error) => assert.ok(error instanceof LockStoreError, error));
      await lock.release().catch((error) => assert.ok(error instanceof LockStoreError, error));
      assert.deepEqual((await client.getItem({ TableName: TABLE, Key: { pk: { S: 'account-8' } }, ConsistentRead: true })).Item, overwritten);
    });

    test('an answer lost after its write applied: the SDK sends the write again, its condition fails on that very write, and the store answers the write\'s version', async () => {
      // An HTTP proxy in front of dynalite that forwards every request and, while `lose` > 0,
      // drops the answer of a PutItem after dynalite applied it (the connection closed).
      let lose = 0;
      const puts = [];
      const proxy = createServer((request, response) => {
        const chunks = [];
        request.on('data', (chunk) => chunks.push(chunk));
        request.on('end', () => {
          const body = Buffer.concat(chunks);
          const put = request.headers['x-amz-target'] === 'DynamoDB_20120810.PutItem';
          const upstream = httpRequest(server.endpoint, { method: 'POST', headers: request.headers }, (answer) => {
            const parts = [];
            answer.on('data', (chunk) => parts.push(chunk));
            answer.on('end', () => {
              if (put) puts.push(JSON.parse(Buffer.concat(parts).toString() || '{}').__type ?? 'applied');
              if (put && lose > 0) {
                lose -= 1;
                request.socket.destroy();
                return;
              }
              response.writeHead(answer.statusCode, answer.headers);
              response.end(Buffer.concat(parts));
            });
          });
          upstream.end(body);
        });
      });
      await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const proxied = await dynamoClient(`http://127.0.0.1:${proxy.address().port}`);
      try {
        const store = new DynamoDbStore(proxied, { table: TABLE });
        const record = async (name) => JSON.parse((await store.read(name)).value);
        lose = 1;
        const lock = await acquireLock(store, 'answer-lost');
        assert.ok(lock !== undefined, 'the create that applied counts');
        assert.deepEqual(puts.map((outcome) => outcome.replace(/.*#/, '')), ['applied', 'ConditionalCheckFailedException'], 'sent twice: applied, then refused by its own write');
        assert.equal((await record('answer-lost')).token, lock.token);
        // The release's answer lost too: the name is free, and taken again at once.
        lose = 1;
        await lock.release();
        assert.equal((await record('answer-lost')).state, 'free');
        const again = await acquireLock(store, 'answer-lost', { waitMs: 0 });
        assert.ok(again !== undefined && again.fence > lock.fence);
        await again.release();
        assert.equal(lose, 0);
      } finally {
        proxied.destroy();
        proxy.close();
      }
    });

    test('docs/stores.md\'s example runs as written against dynalite (endpoint, region and credentials from the environment)', () => {
      const readme = readFileSync(`${root}docs/stores.md`, 'utf8');
      const [, code] = readme.match(/^```js dynamodb\n([\s\S]*?)^```$/m);
      const run = spawnSync(process.execPath, ['--input-type=module', '--no-warnings'], {
        input: code,
        cwd: root,
        encoding: 'utf8',
        timeout: 60_000,
        env: {
          ...process.env,
          AWS_ENDPOINT_URL_DYNAMODB: server.endpoint,
          AWS_REGION: 'us-east-1',
          AWS_ACCESS_KEY_ID: 'keyturn-test',
          AWS_SECRET_ACCESS_KEY: 'keyturn-test',
        },
      });
      assert.equal(run.status, 0, run.stderr);
      const promised = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map(([, said]) => said);
      assert.deepEqual(run.stdout.trim().split('\n'), promised);
    });
  });
});
