// Run inside workerd (Miniflare) as two workers, two isolates, sharing a Durable Object
// namespace: a name taken 3 at a time (tests/js/semaphore-loops.mjs). POST {"op":"lock",
// "holders","turns","holdMs"} runs that many holders of the lock `sem` in this request; POST
// {"op":"serialize","works","holdMs"} runs that many works of the key `sem` through a serializer
// at concurrency 3 over the store. Each holder's `in` and `out` go, while it holds, to
// http://history/ — the test's own outbound service, which keeps them in the order they came.
import { createKeyedSerializer, withLock, DurableObjectStore } from '../../pkg/workerd.js';
import { semaphoreLoops } from '../js/semaphore-loops.mjs';

export { LockDurableObject } from '../../pkg/workerd.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let made;
function parts(env) {
  if (made === undefined) {
    const store = new DurableObjectStore(env.LOCKS, { prefix: 'sem:' });
    made = { store, serialize: createKeyedSerializer({ store, concurrency: 3, timeoutMs: 30_000 }) };
  }
  return made;
}

export default {
  async fetch(request, env) {
    const { op, who, holders, turns, works, holdMs } = await request.json();
    const { store, serialize } = parts(env);
    const record = (event) => fetch('http://history/', { method: 'POST', body: JSON.stringify(event) }).then((response) => response.arrayBuffer());
    if (op === 'lock') {
      const taken = await semaphoreLoops(withLock, store, record, { name: 'sem', n: 3, holders, turns, holdMs, who });
      return Response.json({ taken });
    }
    if (op === 'serialize') {
      await Promise.all(
        Array.from({ length: works }, () =>
          serialize('sem', async (_signal, turn) => {
            await record({ who, kind: 'in', slot: turn.slot, fence: turn.fence });
            if (Math.random() < 0.7) await sleep(Math.random() * holdMs);
            await record({ who, kind: 'out', slot: turn.slot, fence: turn.fence });
          }),
        ),
      );
      return Response.json({ taken: works });
    }
    return new Response(`no op ${op}`, { status: 400 });
  },
};
