// A keyturn instance in a process of its own over a postgresql server, as an isolate elsewhere
// would be: its own pool (and, with `listen`, its own LISTENing client, as the README shows),
// driven by JSON lines on stdin, each answered by one JSON line on stdout:
//   {"op":"semaphore","log",…}   holders of a name taken N at a time (tests/js/semaphore-loops.mjs),
//                                each turn inserted into the table `log` on the server: its turns
//   {"op":"hold","name","staleMs"}  takes `name` and never lets go (nor renews): its fence
// Used by tests/js/postgres-processes.test.mjs.
//
//   node tests/runtimes/postgres-keyturn-process.mjs '{"host":"127.0.0.1","port":5432,"table":"t","listen":true}'
import { createInterface } from 'node:readline';

import { acquireLock, PostgresStore, withLock } from 'keyturn';

import { pgListener, pgPool } from './postgres-clients.mjs';
import { semaphoreLoops } from '../js/semaphore-loops.mjs';

const { host, port, table, listen } = JSON.parse(process.argv[2]);
const { query } = pgPool({ host, port });
const options = { table };
if (listen) options.listen = (await pgListener({ host, port })).listen;
const store = new PostgresStore(query, options);
const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);
const held = [];

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.op === 'semaphore') {
    // The log's order is its serial column's: a turn's `in` is inserted after its acquisition
    // was answered and its `out` before its release, so the serials order them as they held.
    const record = (event) => query(`INSERT INTO "${command.log}" (event) VALUES ($1)`, [JSON.stringify(event)]);
    say({ turns: await semaphoreLoops(withLock, store, record, command) });
  } else if (command.op === 'hold') {
    const lock = await acquireLock(store, command.name, { staleMs: command.staleMs });
    held.push(lock);
    say({ fence: lock.fence });
  }
}
process.exit(0);
