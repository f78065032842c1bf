// Cloudflare Workers (workerd): wrangler and Miniflare hand a `.wasm` import over as a compiled
// WebAssembly.Module, which instantiates synchronously; the lock's on first use. Each request
// runs in an I/O context of its own (see platform.js).
import wasm from './keyturn_wasm_bg.wasm';
import lockWasm from './keyturn_lock_bg.wasm';
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { builtinDiagnostics, useDiagnostics } from './tracing.js';

initSync({ module: wasm });

useDiagnostics(builtinDiagnostics());

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: lockWasm }),
  inContext: true,
});
export * from './api.js';
export { LockDurableObject } from './stores/durable-object.js';
