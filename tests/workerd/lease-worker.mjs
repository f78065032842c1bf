// Run inside workerd (Miniflare) as two workers, two isolates, by
// tests/js/workerd-leases.test.mjs: each request is one op of the lease-rule scenarios
// (tests/js/lease-ops.mjs) in this isolate, over the shared Durable Object namespace (the
// `plain` store) or the shared R2 bucket (`values`: R2's version is the body's MD5).
import { acquireLock, withLock, lockStats, DurableObjectStore, R2Store } from '../../pkg/workerd.js';
import { runOp } from '../js/lease-ops.mjs';

export { LockDurableObject } from '../../pkg/workerd.js';

const api = { acquireLock, withLock, lockStats };
// This isolate's store objects, made on the first request (a lock manager is kept per store).
let stores;

export default {
  async fetch(request, env) {
    stores ??= { plain: new DurableObjectStore(env.LOCKS), values: new R2Store(env.BUCKET) };
    const step = await request.json();
    return Response.json(await runOp(api, (kind) => stores[kind], step));
  },
};
