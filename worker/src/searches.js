// Searches per tenant against a slow upstream whose quota is 5 requests per second per tenant,
// 2 at a time: a serializer keyed by tenant, with `rate` and `concurrency`, over the isolate's
// Durable Object store, so the quota holds in every isolate of the deployment (each start goes
// in the tenant's pace record: one store call). A search waits in its tenant's line for a slot
// and the pace, in order of arrival; another tenant's line never holds it up. A caller that
// would rather be told "later" than wait asks with `?wait=0` (`ifAvailable`) and gets a 429 with
// Retry-After.
//
// Under workerd a waiting search's timer runs in its own request, which stays open while it waits.
import { createKeyedSerializer } from 'keyturn';

import { lockStore } from './locks.js';

/** The upstream's quota per tenant. */
export const SEARCH_RATE = { limit: 5, periodMs: 1000 };
/** Searches of one tenant that may reach the upstream at once. */
export const SEARCHES_AT_ONCE = 2;
/** Searches of one tenant that may wait or run at once in an isolate; more get a 503. */
export const SEARCHES_PENDING = 100;

/** The isolate's serializer over its store, made from the first request's env. */
let searches;

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/**
 * One search for `tenant`: the upstream's answer (UPSTREAM_URL, or — unset, as under `make dev` —
 * an upstream simulated here that takes UPSTREAM_MS), with the slot it ran in and how long it
 * waited for its turn. `ifAvailable`: start now or reject with `SerializedWorkUnavailable`.
 */
export function searchFor(env, tenant, query, ifAvailable) {
  const asked = Date.now();
  searches ??= createKeyedSerializer({ store: lockStore(env), rate: SEARCH_RATE, concurrency: SEARCHES_AT_ONCE, maxPending: SEARCHES_PENDING, timeoutMs: 10_000 });
  return searches(
    tenant,
    async (signal, turn) => {
      const started = Date.now();
      let upstream;
      if (env.UPSTREAM_URL) {
        const response = await fetch(`${env.UPSTREAM_URL}/searches/${encodeURIComponent(tenant)}?q=${encodeURIComponent(query)}`, { signal });
        upstream = { status: response.status, body: await response.json() };
      } else {
        await sleep(Number(env.UPSTREAM_MS ?? 200), signal);
        upstream = { status: 200, body: { simulated: true } };
      }
      return { tenant, query, slot: turn.slot, waitedMs: started - asked, upstreamMs: Date.now() - started, upstream };
    },
    { ifAvailable },
  );
}
