// Runs inside workerd (Miniflare) by tests/js/workerd.test.mjs: the usual mistakes with real
// bindings — a Workers KV namespace given to R2Store, a Durable Object stub given where the
// namespace is expected, and (with a compatibility date before RPC) a namespace whose objects
// answer no RPC — each answered with an error whose message says the fix. GET /misuse answers
// what each raised.
import { acquireLock, DurableObjectStore, LockDurableObject, R2Store } from '../../pkg/workerd.js';

export { LockDurableObject };

const raised = (make) => {
  try {
    make();
    return null;
  } catch (error) {
    return { name: error.name, message: error.message };
  }
};

export default {
  async fetch(request, env) {
    const stub = env.LOCKS.get(env.LOCKS.idFromName('some-lock'));
    const rpc = await acquireLock(new DurableObjectStore(env.LOCKS), 'n').then(
      (lock) => lock.release().then(() => null),
      (error) => ({ name: error.name, message: error.message }),
    );
    return Response.json({
      kvAsBucket: raised(() => new R2Store(env.KV)),
      stubAsNamespace: raised(() => new DurableObjectStore(stub)),
      rpc,
    });
  },
};
