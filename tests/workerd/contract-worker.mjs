// Runs inside workerd (Miniflare): the store contract for the Durable Object store, over RPC to
// real LockDurableObjects, and a lock contention run — with the package's workerd entry, as a
// Worker uses it. GET /contract answers a JSON report.
import { acquireLock, DurableObjectStore, R2Store, LockDurableObject } from '../../pkg/workerd.js';
import { contract } from '../runtimes/contract.mjs';

export { LockDurableObject };

export default {
  async fetch(request, env) {
    const which = new URL(request.url).searchParams.get('store');
    const make = which === 'r2' ? () => new R2Store(env.BUCKET) : () => new DurableObjectStore(env.LOCKS);
    return Response.json({ failures: await contract(make, acquireLock) });
  },
};
