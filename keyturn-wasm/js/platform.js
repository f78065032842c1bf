// The primitives an entry makes for its platform: how the lock's wasm module is instantiated
// (on first use, synchronously), and whether each request runs in an I/O context of its own
// (Cloudflare Workers), in which works start from their own caller's reactions and lock waiters
// wait with timers of their own. Static JS, copied into pkg/ by the build.
import { lockApi } from './lock.js';
import { serializerApi } from './serializer.js';
import { DirectScheduler } from './serializer/direct.js';
import { InContextScheduler } from './serializer/in-context.js';

/**
 * `{ createKeyedSerializer, acquireLock, withLock, lockStats }` for a platform.
 * @param {{ loadLock: import('./lock/manager.js').LoadLock, inContext?: boolean }} platform
 */
export function platformApi({ loadLock, inContext = false }) {
  const locks = lockApi({ load: loadLock, waitInOwnContext: inContext });
  return {
    createKeyedSerializer: serializerApi(inContext ? InContextScheduler : DirectScheduler, locks),
    acquireLock: locks.acquireLock,
    withLock: locks.withLock,
    lockStats: locks.lockStats,
  };
}
