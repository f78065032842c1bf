// Deno: the wasm is read from disk (`Deno.readFileSync`) and instantiated synchronously; the
// lock's module on first use. Deno could run the Node entry, but its `node:fs` costs far more to
// load than the rest of a cold start.
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';

initSync({ module: Deno.readFileSync(new URL('./keyturn_wasm_bg.wasm', import.meta.url)) });

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: Deno.readFileSync(new URL('./keyturn_lock_bg.wasm', import.meta.url)) }),
});
export * from './api.js';
