// Bench worker for bench/stores.mjs: times the Durable Object and R2 stores inside workerd.
import { acquireLock, DurableObjectStore, R2Store, LockDurableObject } from '../../pkg/workerd.js';
import { benchStore } from './store-bench.mjs';

export { LockDurableObject };

export default {
  async fetch(request, env) {
    const which = new URL(request.url).searchParams.get('store');
    const make = which === 'r2' ? () => new R2Store(env.BUCKET) : () => new DurableObjectStore(env.LOCKS);
    return Response.json(await benchStore(make, acquireLock));
  },
};
