// Cloudflare Workers (workerd): wrangler and Miniflare hand a `.wasm` import over as a compiled
// WebAssembly.Module, which instantiates synchronously; the lock's on first use.
import wasm from './keyturn_wasm_bg.wasm';
import lockWasm from './keyturn_lock_bg.wasm';
import { initSync } from './keyturn_wasm.js';
import { setLockLoader, waitInTheirCallersContext } from './lock.js';
import { startWorksInTheirCallersContext } from './serializer.js';

initSync({ module: wasm });
startWorksInTheirCallersContext();
waitInTheirCallersContext();
setLockLoader((lock) => lock.initSync({ module: lockWasm }));

export * from './api.js';
export { LockDurableObject } from './stores/durable-object.js';
