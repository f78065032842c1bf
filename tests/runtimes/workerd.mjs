// A Miniflare (workerd) instance running one of the project's worker scripts against the built
// package, with the bindings the stores need: R2 bucket BUCKET and Durable Object namespace
// LOCKS (LockDurableObject, SQLite) — or two of them, two isolates sharing both. Used by
// tests/js/workerd*.test.mjs and bench/stores.mjs; `worker` also by the fault harness.
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** One worker running `script` (a path from the repository root), as Miniflare takes it. */
export const worker = (script) => ({
  modules: true,
  modulesRoot: root,
  scriptPath: fileURLToPath(new URL(`../../${script}`, import.meta.url)),
  modulesRules: [
    { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
    { type: 'CompiledWasm', include: ['**/*.wasm'] },
  ],
  compatibilityDate: '2025-09-01',
});

/**
 * What workers send out (each request a JSON event), collected in order: `outboundService` for
 * Miniflare's options, and `events` (`events.length = 0` forgets them).
 */
export function collectedEvents() {
  /** @type {unknown[]} */
  const events = [];
  /** @param {Request} request */
  const outboundService = async (request) => {
    events.push(JSON.parse(await request.text()));
    return new Response(null, { status: 204 });
  };
  return { events, outboundService };
}

/** Miniflare running `script` (a path from the repository root). */
export function workerdWith(script) {
  return new Miniflare({
    ...worker(script),
    cf: false,
    r2Buckets: ['BUCKET'],
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
  });
}

/**
 * Miniflare running `script` as two workers, `a` and `b` — two isolates — sharing the Durable
 * Object namespace LOCKS (its class exported by `a`) and the R2 bucket BUCKET.
 * `mf.getWorker(name)` gives each one's fetch.
 */
export function workerdPair(script) {
  const shared = (name, locks) => ({ ...worker(script), name, r2Buckets: { BUCKET: 'keyturn-pair' }, durableObjects: { LOCKS: locks } });
  return new Miniflare({
    cf: false,
    workers: [
      shared('a', { className: 'LockDurableObject', useSQLite: true }),
      shared('b', { className: 'LockDurableObject', scriptName: 'a', useSQLite: true }),
    ],
  });
}
