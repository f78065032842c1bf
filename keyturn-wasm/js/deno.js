// Deno: the wasm is read from disk (`Deno.readFileSync`) and instantiated synchronously; the
// lock's module on first use. Deno could run the Node entry, but its `node:fs` costs far more to
// load than the rest of a cold start.
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { useDiagnostics } from './tracing.js';

// Tracing's channels, imported: through `process.getBuiltinModule` a cold start would also load
// Deno's `process` object, which takes about as long as the rest of it.
useDiagnostics(await import('node:diagnostics_channel').catch(() => undefined));

initSync({ module: Deno.readFileSync(new URL('./keyturn_wasm_bg.wasm', import.meta.url)) });

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: Deno.readFileSync(new URL('./keyturn_lock_bg.wasm', import.meta.url)) }),
});
export * from './api.js';
