// Preloaded (`node --import ./bench/runtimes/tracing-subscriber.mjs bench/serializer-one.mjs …`)
// to measure the serializer with tracing on: one subscriber on each of keyturn's channels
// (docs/tracing.md), doing nothing but keeping the message, so every message is built.
import { subscribe } from 'node:diagnostics_channel';

let last;
for (const name of ['keyturn:turn:wait', 'keyturn:turn:start', 'keyturn:turn:end', 'keyturn:lock:acquire', 'keyturn:lock:release', 'keyturn:lock:lost', 'keyturn:store']) {
  subscribe(name, (message) => {
    last = message;
  });
}
process.on('exit', () => {
  if (last === undefined) throw new Error('tracing-subscriber: nothing was published');
});
