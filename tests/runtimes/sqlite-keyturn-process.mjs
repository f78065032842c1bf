// A keyturn instance in a process of its own over a libSQL `file:` database, as an isolate
// elsewhere would be: its own client (its own connections to the file), driven by JSON lines on
// stdin, each answered by one JSON line on stdout:
//   {"op":"loops","name","n","holders","turns","holdMs","who"}  holders of `name` at `n`
//        (tests/js/semaphore-loops.mjs), each turn a row of the table `history`, written while
//        it holds (its rowid is the order in which both processes' turns happened): its turns
//   {"op":"hold","name","staleMs"}      takes `name` and keeps it until this process is killed
//   {"op":"acquire","name","waitMs"}    takes `name` and releases it: its fence, and when
// Used by tests/js/sqlite-cross-process.test.mjs.
//
//   node tests/runtimes/sqlite-keyturn-process.mjs '{"url":"file:/tmp/locks.db"}'
import { createInterface } from 'node:readline';

import { createClient } from '@libsql/client';
import { acquireLock, SqliteStore, withLock } from 'keyturn';

import { semaphoreLoops } from '../js/semaphore-loops.mjs';

const { url } = JSON.parse(process.argv[2]);
// A busy timeout: the other process may hold the file's write lock for a statement.
const client = createClient({ url, timeout: 10_000 });
// The README's libSQL query, as written there.
const query = (sql, args) => client.execute({ sql, args }).then((r) => r.rows);
const store = new SqliteStore(query);
const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);
const held = [];

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.op === 'loops') {
    const record = (event) => query('INSERT INTO history (event) VALUES (?)', [JSON.stringify(event)]);
    say({ turns: await semaphoreLoops(withLock, store, record, command) });
  } else if (command.op === 'hold') {
    const lock = await acquireLock(store, command.name, { staleMs: command.staleMs });
    held.push(lock);
    say({ fence: lock.fence, heldUntil: lock.heldUntil });
  } else if (command.op === 'acquire') {
    const lock = await acquireLock(store, command.name, { waitMs: command.waitMs });
    const answer = { fence: lock?.fence ?? null, at: Date.now() };
    await lock?.release();
    say(answer);
  }
}
client.close();
process.exit(0);
