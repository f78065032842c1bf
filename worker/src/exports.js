// Exports per tenant against a slow upstream that allows each tenant 2 exports at once: the
// lock `exports:<tenant>` taken 2 at a time (`concurrency: 2`) over the isolate's Durable Object
// store, so at most 2 calls per tenant reach the upstream at once in every isolate of the
// deployment. Each call carries its slot and the slot's fence, which rises with every export in
// that slot: an upstream that keeps the highest fence per slot refuses a call from a holder
// that lost its lease. A caller waits for a slot up to EXPORT_WAIT_MS, then gets a 503.
import { withLock } from 'keyturn';

import { lockStore } from './locks.js';

/** Exports of one tenant that may reach the upstream at once. */
export const EXPORTS_PER_TENANT = 2;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One export for `tenant`: the upstream's answer (UPSTREAM_URL, or — unset, as under
 * `make dev` — an upstream simulated here that takes UPSTREAM_MS), with the slot and fence it ran in.
 */
export function exportFor(env, tenant) {
  const options = { concurrency: EXPORTS_PER_TENANT, waitMs: Number(env.EXPORT_WAIT_MS ?? 10000), staleMs: Number(env.LOCK_STALE_MS ?? 2000) };
  return withLock(
    lockStore(env),
    `exports:${tenant}`,
    async (lock) => {
      const started = Date.now();
      let upstream;
      if (env.UPSTREAM_URL) {
        const response = await fetch(`${env.UPSTREAM_URL}/exports/${encodeURIComponent(tenant)}`, {
          method: 'POST',
          headers: { 'x-slot': String(lock.slot), 'x-fence': String(lock.fence) },
        });
        upstream = { status: response.status, body: await response.json() };
      } else {
        await sleep(Number(env.UPSTREAM_MS ?? 200));
        upstream = { status: 200, body: { simulated: true } };
      }
      return { tenant, slot: lock.slot, fence: lock.fence, upstreamMs: Date.now() - started, upstream };
    },
    options,
  );
}
