// Node, ESM: the wasm is read from disk and instantiated synchronously; no init call needed. The
// lock's module is read on first use. The build bundles this entry and the modules it imports
// into one file (pkg/node.mjs): a graph of a dozen modules costs Node's loader more than its code.
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { builtinDiagnostics, useDiagnostics } from './tracing.js';

// `process.getBuiltinModule` (Node ≥ 20.16) rather than `import … from 'node:fs'`: the ES module
// facade of `fs` reads every export, which loads Node's streams — ~2 ms of a cold start.
const { readFileSync } = globalThis.process?.getBuiltinModule?.('node:fs') ?? (await import('node:fs'));
// Tracing's channels: before Node 20.16, imported.
useDiagnostics(builtinDiagnostics() ?? (await import('node:diagnostics_channel')));

// Each URL is written as Node, Turbopack and file tracers find an asset: `new URL('./…', import.meta.url)`.
const wasm = new URL('./keyturn_wasm_bg.wasm', import.meta.url);
const lockWasm = new URL('./keyturn_lock_bg.wasm', import.meta.url);

// Next's webpack turns such a URL into one relative to its server's public path (`/_next/…`),
// which is no file. There the package's own copy is read instead, found as Node finds the
// package from the app's directory: an app needs no `serverExternalPackages` for it.
const packageDir = wasm.protocol === 'file:' ? undefined : await installedPackageDir();

async function installedPackageDir() {
  const { createRequire } = globalThis.process?.getBuiltinModule?.('node:module') ?? (await import('node:module'));
  return createRequire(`${process.cwd()}/`).resolve('keyturn/package.json').replace(/[\\/]package\.json$/, '');
}

/**
 * @param {URL} url
 * @param {string} file its name in the package
 */
const read = (url, file) => readFileSync(packageDir === undefined ? url : `${packageDir}/${file}`);

initSync({ module: read(wasm, 'keyturn_wasm_bg.wasm') });

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: read(lockWasm, 'keyturn_lock_bg.wasm') }),
});
export * from './api.js';
