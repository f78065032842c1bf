// Two processes over one dynalite server, as two Lambdas over one DynamoDB table: this test's
// process and a child (tests/runtimes/dynamodb-keyturn-process.mjs), each its own keyturn
// instance and DynamoDB client. First the engine itself: are its conditional writes atomic when
// two processes race on one key (exactly one create and one replace of each race wins, and the
// item holds the winner's write)? Then the lock over it, checked from a history: one name taken
// 300 times, a name at concurrency 3, a holder killed and taken over after its lease, a record
// deleted between acquisitions. The server is this test's own, stopped by its PID.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

import { acquireLock, DynamoDbStore, withLock } from 'keyturn';

import { checkHistory, semaphoreLoops } from './semaphore-loops.mjs';
import { createTable, dynamoClient, haveDynalite, startDynalite } from '../runtimes/dynalite-server.mjs';
import { lineProcess } from '../runtimes/line-process.mjs';

const script = fileURLToPath(new URL('../runtimes/dynamodb-keyturn-process.mjs', import.meta.url));
const TABLE = 'keyturn-locks';

let instances = 0;
/** A fresh package instance — its own module, wasm instance and lock core — as a new isolate has. */
const freshInstance = () => import(new URL(`../../pkg/node.mjs?instance=${++instances}`, import.meta.url));

describe('two processes over dynalite', { skip: !haveDynalite() && 'no dynalite (npm ci installs it)' }, () => {
  let server;
  let client;
  let store;
  let history;
  let events = [];
  const children = [];
  before(async () => {
    server = await startDynalite();
    client = await dynamoClient(server.endpoint);
    await createTable(client, TABLE);
    store = new DynamoDbStore(client, { table: TABLE });
    // The history: events appended in the order they arrive, each answered once appended — a
    // turn goes on only after its event is in, so the list's order shows every overlap.
    history = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        events.push(JSON.parse(body));
        response.end();
      });
    });
    await new Promise((resolve) => history.listen(0, '127.0.0.1', resolve));
  });
  after(() => {
    for (const child of children) child.kill('SIGKILL');
    history?.close();
    server?.stop(); // by PID: only the server this test started
  });

  /** The other process: `send(command)` answers its reply line. */
  function other() {
    const { process: child, send } = lineProcess(script, { endpoint: server.endpoint, table: TABLE });
    children.push(child);
    return { child, send };
  }

  test('dynalite is atomic under concurrent conditional writes: of 20 creates and then 20 replaces of one key from two processes, exactly one wins, 20 keys at once', async () => {
    const there = other();
    const keys = Array.from({ length: 20 }, (_, i) => `atomic-${i}`);
    const each = 10;
    /** Both processes' answers, key by key: [here's, there's]. */
    const both = async (here, command) => {
      const [mine, theirs] = await Promise.all([here(), there.send(command)]);
      return keys.map((_, i) => [mine[i], theirs.answers[i]]);
    };
    const race = (items, write) => Promise.all(items.map((item) => Promise.all(Array.from({ length: each }, (_, i) => write(item, `here-${i}`)))));
    const created = await both(() => race(keys, (key, value) => store.create(key, value)), { op: 'creates', keys, each });
    const pairs = [];
    for (const [i, [mine, theirs]] of created.entries()) {
      const wins = [...mine, ...theirs].filter((version) => version !== null);
      assert.equal(wins.length, 1, `${keys[i]}: ${wins.length} of ${2 * each} creates won (${JSON.stringify([mine, theirs])})`);
      const read = await store.read(keys[i]);
      assert.equal(read.version, wins[0], `${keys[i]}: the item holds the winner's write`);
      pairs.push([keys[i], read.version]);
    }
    const replaced = await both(() => race(pairs, ([key, version], value) => store.replace(key, version, value)), { op: 'replaces', pairs, each });
    for (const [i, [mine, theirs]] of replaced.entries()) {
      const wins = [...mine, ...theirs].filter((version) => version !== null);
      assert.equal(wins.length, 1, `${keys[i]}: ${wins.length} of ${2 * each} replaces won (${JSON.stringify([mine, theirs])})`);
      assert.equal((await store.read(keys[i])).version, wins[0], `${keys[i]}: the item holds the winning replace`);
    }
    there.child.kill('SIGKILL');
  });

  for (const [n, holders, turns] of [
    [1, 3, 50],
    [3, 5, 20],
  ]) {
    const total = 2 * holders * turns;
    test(`a name at concurrency ${n}, 2 × ${holders} holders, ${total} turns: the history has never two holders of a slot, fences rising per slot`, async () => {
      const there = other();
      events = [];
      const log = `http://127.0.0.1:${history.address().port}/`;
      const options = { name: `name-${n}`, n, holders, turns, holdMs: 5 };
      const [theirs, mine] = await Promise.all([
        there.send({ op: 'semaphore', log, ...options }),
        semaphoreLoops(withLock, store, (event) => events.push(event), { ...options, who: 'here' }),
      ]);
      assert.deepEqual([theirs.turns, mine], [holders * turns, holders * turns]);
      const { most, turns: seen, perSlot } = checkHistory(events, n);
      assert.equal(seen, total);
      assert.equal(most, n);
      const whose = new Set(events.map((event) => event.who));
      assert.equal(whose.size, 2, 'both processes held the name');
      assert.ok(perSlot.every((count) => count > 0), `every slot was used: ${perSlot}`);
      there.child.kill('SIGKILL');
    });
  }

  test('a holder killed while it holds is taken over after its lease (1 s), with a fence above its', async () => {
    const there = other();
    const asked = performance.now();
    const { fence } = await there.send({ op: 'hold', name: 'dies', staleMs: 1000 });
    const exited = new Promise((resolve) => there.child.once('exit', resolve));
    there.child.kill('SIGKILL');
    await exited;
    const lock = await acquireLock(store, 'dies', { waitMs: 30_000 });
    const ms = performance.now() - asked;
    assert.ok(lock !== undefined && lock.fence > fence, `taken with fence ${lock?.fence} above ${fence}`);
    // Not before its lease: the dead holder stamped it after it was asked to take the name (by
    // the wall clock, in whole milliseconds). The bound above is only the wait's.
    assert.ok(ms >= 990, `taken over ${ms.toFixed(0)} ms after the holder was asked to take the name`);
    await lock.release();
  });

  test('a record deleted between acquisitions: a fresh instance takes fences above every one the other process took', async () => {
    const there = other();
    const { fences: before } = await there.send({ op: 'acquisitions', name: 'lost', count: 5 });
    assert.ok(before.every((f, i) => i === 0 || f > before[i - 1]));
    await client.deleteItem({ TableName: TABLE, Key: { pk: { S: 'lost' } } });
    assert.equal(await store.read('lost'), null, 'the record is gone');
    // The fences follow the clock (whole milliseconds): the next acquisition comes after the
    // last one's millisecond.
    await new Promise((resolve) => setTimeout(resolve, 2));
    const fresh = await freshInstance();
    const freshStore = new fresh.DynamoDbStore(client, { table: TABLE });
    const after = [];
    for (let i = 0; i < 3; i++) {
      const lock = await fresh.acquireLock(freshStore, 'lost');
      after.push(lock.fence);
      await lock.release();
    }
    assert.ok(Math.min(...after) > Math.max(...before), `${after} above ${before}`);
    there.child.kill('SIGKILL');
  });
});
