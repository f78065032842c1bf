// Runs inside workerd (Miniflare): the store contract for the Durable Object store, over RPC to
// real LockDurableObjects, and a lock contention run — with the package's workerd entry, as a
// Worker uses it. GET /contract answers a JSON report.
import { acquireLock, createKeyedSerializer, DurableObjectStore, R2Store, LockDurableObject, SerializedWorkTimeout } from '../../pkg/workerd.js';
import { contract } from '../runtimes/contract.mjs';

export { LockDurableObject };

// One serializer for the isolate, shared by every request, as a worker holds it. Its deadline
// leaves a work's R2 put and get (a few milliseconds, tens on a busy machine) 600 ms.
const serialize = createKeyedSerializer({ timeoutMs: 600 });

/** GET /serialize?n=N&hang=1: a work for key "k" that does R2 I/O, or never settles. */
async function serializeRoute(url, env) {
  const n = url.searchParams.get('n');
  const hang = url.searchParams.get('hang') === '1';
  try {
    const value = await serialize('k', async (signal) => {
      if (hang) return new Promise(() => {});
      await env.BUCKET.put(`serialized/${n}`, n);
      const object = await env.BUCKET.get(`serialized/${n}`);
      return { text: await object.text(), aborted: signal.aborted };
    });
    return Response.json(value);
  } catch (error) {
    if (error instanceof SerializedWorkTimeout) return Response.json({ timedOut: error.key }, { status: 503 });
    throw error;
  }
}

// Three at a time per key, across the isolate's requests: what each work saw, for /concurrency-log.
const threeAtATime = createKeyedSerializer({ concurrency: 3, timeoutMs: 5000 });
const seen = { calls: [], starts: [], slots: [], running: 0, most: 0, overlaps: 0 };

/** GET /concurrency?n=N: a work for key "k" that does R2 I/O, at most three at once. */
async function concurrencyRoute(url, env) {
  const n = Number(url.searchParams.get('n'));
  seen.calls.push(n);
  const slot = await threeAtATime('k', async (_signal, turn) => {
    seen.starts.push(n);
    if (seen.slots.includes(turn.slot)) seen.overlaps += 1;
    seen.slots.push(turn.slot);
    seen.running += 1;
    seen.most = Math.max(seen.most, seen.running);
    await env.BUCKET.put(`concurrent/${n}`, String(n));
    await env.BUCKET.get(`concurrent/${n}`);
    seen.running -= 1;
    seen.slots.splice(seen.slots.indexOf(turn.slot), 1);
    return turn.slot;
  });
  return Response.json({ slot });
}

// Works that call the serializer themselves, at once, for keys of their own.
const nesting = createKeyedSerializer({ timeoutMs: 5000 });

/**
 * GET /nested?n=N: a work for key "outer" that does R2 I/O, and from its first line queues two
 * works of its own, on keys "inner-N" and "shared": what they answered, in order.
 */
async function nestedRoute(url, env) {
  const n = url.searchParams.get('n');
  const value = await nesting('outer', async () => {
    const inner = [nesting(`inner-${n}`, async () => `inner-${n}`), nesting('shared', async () => `shared-${n}`)];
    await env.BUCKET.put(`nested/${n}`, n);
    return [(await env.BUCKET.get(`nested/${n}`)).text(), ...inner];
  });
  return Response.json({ answers: await Promise.all(value), pending: nesting.pending() });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/serialize') return serializeRoute(url, env);
    if (url.pathname === '/concurrency') return concurrencyRoute(url, env);
    if (url.pathname === '/nested') return nestedRoute(url, env);
    if (url.pathname === '/concurrency-log') return Response.json({ ...seen, pending: threeAtATime.pending() });
    const which = url.searchParams.get('store');
    const make = which === 'r2' ? () => new R2Store(env.BUCKET) : () => new DurableObjectStore(env.LOCKS);
    return Response.json({ failures: await contract(make, acquireLock) });
  },
};
