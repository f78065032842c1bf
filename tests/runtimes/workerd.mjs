// A Miniflare (workerd) instance running one of the project's worker scripts against the built
// package, with the bindings the stores need: R2 bucket BUCKET and Durable Object namespace
// LOCKS (LockDurableObject, SQLite). Used by tests/js/workerd.test.mjs and bench/stores.mjs.
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Miniflare running `script` (a path from the repository root). */
export function workerdWith(script) {
  return new Miniflare({
    modules: true,
    modulesRoot: root,
    scriptPath: fileURLToPath(new URL(`../../${script}`, import.meta.url)),
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2025-09-01',
    cf: false,
    r2Buckets: ['BUCKET'],
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
  });
}
