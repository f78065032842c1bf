// A pace per key as users build it from the libraries they pick instead of keyturn's `rate`,
// each keyed the way its docs show (one limiter per key) and configured for "at most `limit`
// starts per `periodMs`, at most `concurrency` at once":
// - Bottleneck's reservoir: `limit` jobs, refilled to `limit` every `periodMs`. The refill is a
//   fixed schedule, checked on the limiter's heartbeat (`heartbeatInterval`, by default coarser
//   than a short period), not a window over start times.
// - Bottleneck's `minTime`: starts spaced `periodMs / limit` apart — a smoothing, not a budget:
//   a burst on an idle key waits too.
// - p-queue's `intervalCap`/`interval`: a count reset on a fixed interval; with `strict: true`
//   (p-queue 9), a window that slides over start times.
// Neither library hands the work a signal or bounds it with a deadline. A key's limiter must
// outlive its window, or a burst on a key gone idle would find a new limiter with a fresh
// budget: Bottleneck's group drops one after its `timeout` (5 minutes by default); the p-queues
// are kept for the run (a map that never forgets a key — what a user would bound with an expiry
// of at least a period).
import Bottleneck from 'bottleneck';
import PQueue from 'p-queue';

import { createKeyedSerializer } from 'keyturn';

/** @typedef {{ limit: number, periodMs: number, concurrency: number }} Pace */

function pQueue({ limit, periodMs, concurrency }, strict) {
  const queues = new Map();
  const paced = (key, work) => {
    let queue = queues.get(key);
    if (queue === undefined) {
      queue = new PQueue({ concurrency, intervalCap: limit, interval: periodMs, strict });
      queues.set(key, queue);
    }
    return queue.add(work);
  };
  return Object.assign(paced, { close: () => queues.forEach((queue) => queue.clear()) });
}

/** name → (pace) → (key, work) => Promise, each a fresh limiter set; `close()` lets it go. */
export const pacePeers = {
  keyturn: ({ limit, periodMs, concurrency }) => {
    const serialize = createKeyedSerializer({ rate: { limit, periodMs }, concurrency });
    return Object.assign((key, work) => serialize(key, work), { close() {} });
  },
  'Bottleneck reservoir': ({ limit, periodMs, concurrency }) => bottleneck({ reservoir: limit, reservoirRefreshAmount: limit, reservoirRefreshInterval: periodMs, maxConcurrent: concurrency }),
  // The heartbeat at a tenth of the period, so the refill comes close to its schedule.
  'Bottleneck reservoir, heartbeat period/10': ({ limit, periodMs, concurrency }) =>
    bottleneck({ reservoir: limit, reservoirRefreshAmount: limit, reservoirRefreshInterval: periodMs, maxConcurrent: concurrency, heartbeatInterval: periodMs / 10 }),
  'Bottleneck minTime': ({ limit, periodMs, concurrency }) => bottleneck({ minTime: periodMs / limit, maxConcurrent: concurrency }),
  'p-queue intervalCap': (pace) => pQueue(pace, false),
  'p-queue intervalCap, strict': (pace) => pQueue(pace, true),
};

function bottleneck(options) {
  const group = new Bottleneck.Group(options);
  return Object.assign((key, work) => group.key(key).schedule(work), {
    close: () => Promise.all(group.limiters().map(({ limiter }) => limiter.disconnect(false))),
  });
}
