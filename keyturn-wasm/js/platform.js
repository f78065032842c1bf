// The primitives an entry makes for its platform: how the lock's wasm module is instantiated
// (on first use, synchronously), and whether each request runs in an I/O context of its own
// (Cloudflare Workers), where every call keeps its timer in its own request and works start from
// their own request's reactions. Static JS, copied into pkg/ by the build.
import * as serializerGlue from './keyturn_wasm.js';
import * as lockGlue from './keyturn_lock.js';
import { InstanceHost } from './instance.js';
import { Host } from './engine.js';
import { Locks, lockApi } from './lock.js';
import { serializerApi } from './serializer.js';

/**
 * Told, for each JS object an instance held when it failed: what waits in it is told.
 * @param {unknown} value
 * @param {Error} failure
 */
const settle = (value, failure) => /** @type {{ failed?: (failure: Error) => void } | undefined} */ (value)?.failed?.(failure);

// One instance host per module in a process, whatever the entries: the glue's instance is one.
/** @type {InstanceHost | undefined} */
let serializers;
/** @type {InstanceHost | undefined} */
let locks;

/**
 * `{ createKeyedSerializer, acquireLock, withLock, lockStats }` for a platform.
 * @param {{ loadLock: (glue: typeof lockGlue) => void, inContext?: boolean }} platform
 */
export function platformApi({ loadLock, inContext = false }) {
  const lockHosts = new Locks(() => {
    if (locks === undefined) {
      loadLock(lockGlue);
      locks = new InstanceHost(lockGlue, settle);
    }
    const live = locks;
    return { glue: lockGlue, instance: () => live.current() };
  }, inContext);
  const hosts = {
    inContext,
    plain: () => {
      serializers ??= new InstanceHost(serializerGlue, settle);
      return new Host(serializerGlue, serializers.current(), undefined, undefined, inContext);
    },
    /**
     * @param {unknown} store
     * @param {string} what
     */
    forStore: (store, what) => lockHosts.host(store, undefined, what),
  };
  return { createKeyedSerializer: serializerApi(hosts), ...lockApi(lockHosts) };
}
