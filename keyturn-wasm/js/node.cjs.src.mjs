// Node, CommonJS: bundled by the build into pkg/node.cjs (esbuild, format cjs), so `require`
// works on Node versions that cannot require ES modules. Same sources as node.mjs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { initSync } from './keyturn_wasm.js';
import { platformApi } from './platform.js';
import { useDiagnostics } from './tracing.js';
import * as diagnostics from 'node:diagnostics_channel';

initSync({ module: readFileSync(join(__dirname, 'keyturn_wasm_bg.wasm')) });
useDiagnostics(diagnostics);

export const { createKeyedSerializer, acquireLock, withLock, lockStats } = platformApi({
  loadLock: (lock) => lock.initSync({ module: readFileSync(join(__dirname, 'keyturn_lock_bg.wasm')) }),
});
export * from './api.js';
