// Vercel's Edge runtime and Next.js edge routes (the `edge-light` condition). The runtime refuses
// to compile wasm from bytes, so nothing here fetches or compiles: Vercel's bundlers (Next's
// webpack and Turbopack, `vercel build`) hand a `.wasm?module` import over as a compiled
// WebAssembly.Module, as they do @vercel/og's. `next build` loads each edge route to read its
// configuration, so this module's load-time work runs there too; without a fetch it succeeds.
// The serializer's module is instantiated now, synchronously; the lock's on first use.
import wasm from './keyturn_wasm_bg.wasm?module';
import lockWasm from './keyturn_lock_bg.wasm?module';
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { builtinDiagnostics, useDiagnostics } from './tracing.js';

/**
 * The module, as the glue's `instanceof WebAssembly.Module` check accepts it. Next's sandbox
 * compiles it in the host's realm, where it fails that check and the glue would compile it again
 * from it as if it were bytes (refused); an instance is made from a module of any realm, so the
 * module takes this realm's prototype instead.
 * @param {WebAssembly.Module} module
 */
const thisRealm = (module) =>
  module instanceof WebAssembly.Module ? module : Object.setPrototypeOf(module, WebAssembly.Module.prototype);

initSync({ module: thisRealm(wasm) });

useDiagnostics(builtinDiagnostics());

// Each call keeps its timer in its own request, as on Workers (workerd.js): an edge isolate may
// tie what a request started to that request.
export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: thisRealm(lockWasm) }),
  inContext: true,
});
export * from './api.js';
