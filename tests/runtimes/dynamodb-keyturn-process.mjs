// A keyturn instance in a process of its own over a dynalite server, as a Lambda beside another
// would be: its own DynamoDB client, driven by JSON lines on stdin, each answered by one JSON
// line on stdout (tests/js/dynamodb-cross-process.test.mjs is the other side):
//   {"op":"creates","keys","each"}          `each` concurrent creates of every key at once: the
//                                           keys it won, with the versions it was answered
//   {"op":"replaces","pairs","each"}        the same with replaces of [key, version] pairs
//   {"op":"semaphore","log",…}              holders of a name (tests/js/semaphore-loops.mjs), each
//                                           turn POSTed to the history server at `log`: its turns
//   {"op":"hold","name","staleMs"}          acquires `name` and keeps it, never renewed: its fence
//   {"op":"acquisitions","name","count"}    acquires and releases `name` `count` times: the fences
//
//   node tests/runtimes/dynamodb-keyturn-process.mjs '{"endpoint":"http://127.0.0.1:4567","table":"t"}'
import { createInterface } from 'node:readline';

import { acquireLock, DynamoDbStore, withLock } from 'keyturn';

import { semaphoreLoops } from '../js/semaphore-loops.mjs';
import { dynamoClient } from './dynalite-server.mjs';

const { endpoint, table } = JSON.parse(process.argv[2]);
const store = new DynamoDbStore(await dynamoClient(endpoint), { table });
const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);
const held = [];
const who = `pid${process.pid}`;

/** `each` concurrent calls of `write(item)` for every item at once: what each item's calls answered. */
async function race(items, each, write) {
  return Promise.all(items.map((item) => Promise.all(Array.from({ length: each }, (_, i) => write(item, `${who}-${i}`)))));
}

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.op === 'creates') {
    say({ answers: await race(command.keys, command.each, (key, value) => store.create(key, value)) });
  } else if (command.op === 'replaces') {
    say({ answers: await race(command.pairs, command.each, ([key, version], value) => store.replace(key, version, value)) });
  } else if (command.op === 'semaphore') {
    // The history's order is the history server's: a turn waits for its event's answer.
    const record = async (event) => {
      const response = await fetch(command.log, { method: 'POST', body: JSON.stringify(event) });
      if (!response.ok) throw new Error(`history server: ${response.status}`);
      await response.arrayBuffer();
    };
    say({ turns: await semaphoreLoops(withLock, store, record, { ...command, who }) });
  } else if (command.op === 'hold') {
    const lock = await acquireLock(store, command.name, { staleMs: command.staleMs });
    held.push(lock);
    say({ fence: lock.fence });
  } else if (command.op === 'acquisitions') {
    const fences = [];
    for (let i = 0; i < command.count; i++) {
      const lock = await acquireLock(store, command.name);
      fences.push(lock.fence);
      await lock.release();
    }
    say({ fences });
  }
}
process.exit(0);
