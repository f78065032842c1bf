import { readFileSync } from 'node:fs';
import { initSync } from './pkg/keyturn_wasm.js';
import { platformApi } from './pkg/platform.js';
import { bareChain } from './bench/runtimes/bare-chain.mjs';
import { serializeMany } from './tests/workerd/limits-worker-node.tmp.mjs';
initSync({ module: readFileSync(new URL('./pkg/keyturn_wasm_bg.wasm', import.meta.url)) });
const api = platformApi({ loadLock: () => {}, inContext: true });
const impl = process.argv[2], keys = Number(process.argv[3] ?? 1);
const create = impl === 'keyturn' ? api.createKeyedSerializer : ({ timeoutMs }) => bareChain({ timeoutMs });
const rates = [];
for (let r = 0; r < 8; r++) {
  const t = performance.now();
  await serializeMany(create, 100000, keys);
  rates.push(100000 / ((performance.now() - t) / 1000));
}
rates.sort((a, b) => a - b);
console.log(JSON.stringify({ impl, keys, cold: rates[0], perSecond: rates }));
