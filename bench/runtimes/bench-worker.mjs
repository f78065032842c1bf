// Bench worker for bench/stores.mjs and bench/serializer-store.mjs: times the Durable Object and
// R2 stores inside workerd, and a serializer over the Durable Object store.
import * as keyturn from '../../pkg/workerd.js';
import { benchStore } from './store-bench.mjs';
import { benchSerializedStore } from './serialized-store-bench.mjs';

const { acquireLock, DurableObjectStore, R2Store, LockDurableObject } = keyturn;

export { LockDurableObject };

export default {
  async fetch(request, env) {
    const params = new URL(request.url).searchParams;
    const which = params.get('store');
    if (params.get('serialized') === '1') return Response.json(await benchSerializedStore(() => new DurableObjectStore(env.LOCKS), keyturn));
    const make = which === 'r2' ? () => new R2Store(env.BUCKET) : () => new DurableObjectStore(env.LOCKS);
    return Response.json(await benchStore(make, acquireLock));
  },
};
