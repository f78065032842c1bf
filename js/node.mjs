// Node, ESM: the wasm is read from disk and instantiated synchronously; no init call needed.
import { readFileSync } from 'node:fs';
import { initSync } from './keyturn_wasm.js';

initSync({ module: readFileSync(new URL('./keyturn_wasm_bg.wasm', import.meta.url)) });

export * from './api.js';
