// Node, ESM: the wasm is read from disk and instantiated synchronously; no init call needed. The
// lock's module is read on first use. The build bundles this entry and the modules it imports
// into one file (pkg/node.mjs): a graph of a dozen modules costs Node's loader more than its code.
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { useDiagnostics } from './tracing.js';

// `process.getBuiltinModule` (Node ≥ 20.16) rather than `import … from 'node:fs'`: the ES module
// facade of `fs` reads every export, which loads Node's streams — ~2 ms of a cold start.
const { readFileSync } = globalThis.process?.getBuiltinModule?.('node:fs') ?? (await import('node:fs'));
// Tracing's channels: tracing.js asks `getBuiltinModule` for them; before it, imported here.
if (globalThis.process?.getBuiltinModule === undefined) useDiagnostics(await import('node:diagnostics_channel'));

initSync({ module: readFileSync(new URL('./keyturn_wasm_bg.wasm', import.meta.url)) });

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: readFileSync(new URL('./keyturn_lock_bg.wasm', import.meta.url)) }),
});
export * from './api.js';
