// Run inside workerd (Miniflare) as two workers, two isolates, sharing a Durable Object
// namespace: the busy key of tests/js/busy-key.mjs across isolates. POST {"op":"busy","ms"} keeps
// 4 works in flight on the key for `ms` (in this one request: a request's I/O ends with it) and
// answers the turns taken and the store calls made; POST {"op":"call"} runs one work on the key
// and answers how long it waited for its turn; POST {"op":"calls"} answers this isolate's store
// calls so far. `"polls": true` uses the store without its `changed`.
import { createKeyedSerializer, lockStats, DurableObjectStore } from '../../pkg/workerd.js';
import { busyLoops } from '../js/busy-key.mjs';

export { LockDurableObject } from '../../pkg/workerd.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// This isolate's store objects and serializers, one pair per mode, made on the first request.
const modes = new Map();

function mode(env, polls) {
  let found = modes.get(polls);
  if (found === undefined) {
    const store = new DurableObjectStore(env.LOCKS, { prefix: polls ? 'busy-polls:' : 'busy:' });
    const used = polls ? { create: (...a) => store.create(...a), read: (...a) => store.read(...a), replace: (...a) => store.replace(...a) } : store;
    found = { store: used, serialize: createKeyedSerializer({ store: used, timeoutMs: 10_000 }) };
    modes.set(polls, found);
  }
  return found;
}

export default {
  async fetch(request, env) {
    const { op, ms, polls = false } = await request.json();
    const { store, serialize } = mode(env, polls);
    const calls = () => lockStats(store).storeCalls;
    if (op === 'busy') {
      const before = calls();
      const loops = busyLoops(serialize);
      await sleep(ms);
      const turns = await loops.stop();
      return Response.json({ turns, calls: calls() - before });
    }
    if (op === 'call') {
      const called = Date.now();
      let waited = 0;
      await serialize('busy', async () => {
        waited = Date.now() - called;
        await sleep(1);
      });
      return Response.json({ waited });
    }
    if (op === 'calls') return Response.json({ calls: calls() });
    return new Response(`no op ${op}`, { status: 400 });
  },
};
