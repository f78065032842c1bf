// Cloudflare Workers (workerd): wrangler and Miniflare hand a `.wasm` import over as a compiled
// WebAssembly.Module, which instantiates synchronously.
import wasm from './keyturn_wasm_bg.wasm';
import { initSync } from './keyturn_wasm.js';

initSync({ module: wasm });

export * from './api.js';
