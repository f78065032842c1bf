// The package's modules as one graph — what pkg/node.mjs bundles into one file — for the tests
// that reach inside: fault injection patches a binding's prototype, and KEYTURN_CONTEXTUAL=1
// makes the primitives the workerd entry makes (each work started from its own caller's
// reaction, a deadline timer per work; lock waiters with timers of their own).
import { readFileSync } from 'node:fs';

import { initSync } from '../../pkg/keyturn_wasm.js';
import { platformApi } from '../../pkg/platform.js';

initSync({ module: readFileSync(new URL('../../pkg/keyturn_wasm_bg.wasm', import.meta.url)) });

/** Whether this run is in the workerd entry's start mode. */
export const contextual = process.env.KEYTURN_CONTEXTUAL === '1';

export const { createKeyedSerializer, acquireLock, withLock } = platformApi({
  loadLock: (lock) => lock.initSync({ module: readFileSync(new URL('../../pkg/keyturn_lock_bg.wasm', import.meta.url)) }),
  inContext: contextual,
});
export * from '../../pkg/api.js';
export { SerializerBinding } from '../../pkg/keyturn_wasm.js';
export { LockCoreBinding } from '../../pkg/keyturn_lock.js';
