// The package's modules as one graph — what pkg/node.mjs bundles into one file — for the tests
// that reach inside: fault injection patches a binding's prototype, and KEYTURN_CONTEXTUAL=1
// turns on the start mode the workerd entry uses (each work started from its own caller's
// reaction, a deadline timer per work; lock waiters with timers of their own).
import { readFileSync } from 'node:fs';

import { initSync } from '../../pkg/keyturn_wasm.js';
import { setLockLoader, waitInTheirCallersContext } from '../../pkg/lock.js';
import { startWorksInTheirCallersContext } from '../../pkg/serializer.js';

initSync({ module: readFileSync(new URL('../../pkg/keyturn_wasm_bg.wasm', import.meta.url)) });
setLockLoader((lock) => lock.initSync({ module: readFileSync(new URL('../../pkg/keyturn_lock_bg.wasm', import.meta.url)) }));

/** Whether this run is in the workerd entry's start mode. */
export const contextual = process.env.KEYTURN_CONTEXTUAL === '1';
if (contextual) {
  startWorksInTheirCallersContext();
  waitInTheirCallersContext();
}

export * from '../../pkg/api.js';
export { SerializerBinding } from '../../pkg/keyturn_wasm.js';
export { LockCoreBinding } from '../../pkg/keyturn_lock.js';
