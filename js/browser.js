// Browsers, Deno and bundlers: the wasm is fetched next to this file (bundlers rewrite the
// `new URL(…, import.meta.url)` pattern into an asset) and instantiated by top-level await.
import init from './keyturn_wasm.js';

await init({ module_or_path: new URL('./keyturn_wasm_bg.wasm', import.meta.url) });

export * from './api.js';
