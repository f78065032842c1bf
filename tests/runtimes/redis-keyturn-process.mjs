// A keyturn instance in a process of its own over a redis-server, as an isolate elsewhere would
// be: its own connections (and, with `subscribe`, a subscriber connection, as the README shows),
// driven by JSON lines on stdin, each answered by one JSON line on stdout:
//   {"op":"start"}                 starts a busy key (tests/js/busy-key.mjs's busyLoops)
//   {"op":"calls"}                 its store calls so far
//   {"op":"stop"}                  stops the busy key: its turns, and its calls
//   {"op":"acquire","name","waitMs"}  starts an acquisition of `name` (answered at once)
//   {"op":"paced","key","count","limit","periodMs","log"}  `count` works of `key` on a serializer
//                                  paced at `limit` per `periodMs`, each start and end pushed to
//                                  the list `log` (tests/js/paced-works.mjs): answered when done
//   {"op":"semaphore","log",…}     holders of a name taken N at a time (tests/js/semaphore-loops.mjs),
//                                  each turn pushed to the list `log` on the server: its turns
// Used by tests/js/cross-process.test.mjs and bench/cross-isolate.mjs.
//
//   node tests/runtimes/redis-keyturn-process.mjs '{"port":6379,"prefix":"p:","subscribe":true}'
import { createInterface } from 'node:readline';

import { createClient } from 'redis';
import { acquireLock, createKeyedSerializer, lockStats, RedisStore, withLock } from 'keyturn';

import { busyLoops } from '../js/busy-key.mjs';
import { pacedWorks } from '../js/paced-works.mjs';
import { semaphoreLoops } from '../js/semaphore-loops.mjs';

const { port, prefix, subscribe } = JSON.parse(process.argv[2]);
const client = await createClient({ url: `redis://127.0.0.1:${port}` }).connect();
const options = { prefix };
if (subscribe) {
  const subscriber = await client.duplicate().connect();
  options.subscribe = async (channel, onMessage) => {
    await subscriber.subscribe(channel, onMessage);
    return () => subscriber.unsubscribe(channel, onMessage);
  };
}
const store = new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }), options);
const serialize = createKeyedSerializer({ store, timeoutMs: 10_000 });
const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);
let loops;
const held = [];

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.op === 'start') {
    loops = busyLoops(serialize);
    say({ started: true });
  } else if (command.op === 'calls') {
    say({ calls: lockStats(store).storeCalls });
  } else if (command.op === 'stop') {
    const turns = await loops.stop();
    say({ turns, calls: lockStats(store).storeCalls });
  } else if (command.op === 'semaphore') {
    const record = (event) => client.rPush(command.log, JSON.stringify(event));
    say({ turns: await semaphoreLoops(withLock, store, record, command) });
  } else if (command.op === 'paced') {
    const paced = createKeyedSerializer({ store, timeoutMs: 10_000, rate: { limit: command.limit, periodMs: command.periodMs } });
    await pacedWorks(paced, command.key, command.count, (event) => client.rPush(command.log, JSON.stringify(event)));
    say({ done: true });
  } else if (command.op === 'acquire') {
    held.push(acquireLock(store, command.name, { waitMs: command.waitMs }));
    say({ acquiring: true });
  }
}
process.exit(0);
