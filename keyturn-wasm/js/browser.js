// Browsers, Deno and bundlers: the wasm is fetched next to this file (bundlers rewrite the
// `new URL(…, import.meta.url)` pattern into an asset) and instantiated by top-level await. A
// browser cannot instantiate a module synchronously on first use, so both are fetched now.
import init from './keyturn_wasm.js';
import initLock from './keyturn_lock.js';
import { platformApi } from './platform.js';
import { builtinDiagnostics, useDiagnostics } from './tracing.js';

await Promise.all([
  init({ module_or_path: new URL('./keyturn_wasm_bg.wasm', import.meta.url) }),
  initLock({ module_or_path: new URL('./keyturn_lock_bg.wasm', import.meta.url) }),
]);

useDiagnostics(builtinDiagnostics());

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({ loadLock: () => {} });
export * from './api.js';
