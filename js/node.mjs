// Node, ESM: the wasm is read from disk and instantiated synchronously; no init call needed. The
// lock's module is read on first use.
import { readFileSync } from 'node:fs';
import { initSync } from './keyturn_wasm.js';
import { setLockLoader } from './lock.js';

initSync({ module: readFileSync(new URL('./keyturn_wasm_bg.wasm', import.meta.url)) });
setLockLoader((lock) => lock.initSync({ module: readFileSync(new URL('./keyturn_lock_bg.wasm', import.meta.url)) }));

export * from './api.js';
