// Run by `bun test` (tests/js/bun.test.mjs copies it into a project on the packed tarball): the
// package in Bun's own server and test runner. Bun.serve answers concurrent requests, each a
// read-modify-write of one key's count under the serializer, and a lock over bun:sqlite across
// two Bun workers (two isolates, each its own instance of the package) counts exactly.
import { expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { createKeyedSerializer } from 'keyturn';

const REQUESTS = 50;

test('Bun.serve: concurrent POSTs to one key, each read-modify-write in its turn, counted exactly', async () => {
  const serialize = createKeyedSerializer({ timeoutMs: 30_000 });
  const counts = new Map();
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const id = new URL(request.url).pathname.slice(1);
      const count = await serialize(id, async () => {
        const read = counts.get(id) ?? 0;
        await Bun.sleep(1); // a store round trip: without the turn, two requests read one value
        counts.set(id, read + 1);
        return read + 1;
      });
      return Response.json({ count });
    },
  });
  try {
    const answers = await Promise.all(Array.from({ length: REQUESTS }, () => fetch(`${server.url}order-1`, { method: 'POST' }).then((response) => response.json())));
    expect(answers.map(({ count }) => count).toSorted((a, b) => a - b)).toEqual(Array.from({ length: REQUESTS }, (_, i) => i + 1));
    expect(counts.get('order-1')).toBe(REQUESTS);
  } finally {
    server.stop(true);
  }
});

test('two Bun workers over one bun:sqlite file: withLock increments counted exactly', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyturn-bun-'));
  try {
    const file = join(dir, 'locks.db');
    const db = new Database(file);
    db.run('PRAGMA journal_mode = WAL');
    db.run('CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)');
    db.run('INSERT INTO counter (id, n) VALUES (1, 0)');
    const each = 20;
    const workers = [0, 1].map(() => new Worker(new URL('./bun-lock-worker.mjs', import.meta.url).href));
    const done = workers.map((worker) => new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => (data.error ? reject(new Error(data.error)) : resolve(data));
      worker.onerror = (event) => reject(event.error ?? new Error(event.message));
    }));
    workers.forEach((worker) => worker.postMessage({ file, each }));
    const results = await Promise.all(done);
    for (const worker of workers) worker.terminate();
    // Each worker's increments saw every earlier one: the values it wrote are all distinct.
    expect(results.flatMap(({ wrote }) => wrote).toSorted((a, b) => a - b)).toEqual(Array.from({ length: 2 * each }, (_, i) => i + 1));
    expect(db.query('SELECT n FROM counter WHERE id = 1').get().n).toBe(2 * each);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
