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
// Neither library hands the work a signal or bounds it with a deadline.
import Bottleneck from 'bottleneck';
import PQueue from 'p-queue';

import { createKeyedSerializer } from 'keyturn';
import { keyed } from './peers.mjs';

/** @typedef {{ limit: number, periodMs: number, concurrency: number }} Pace */

const pQueue = ({ limit, periodMs, concurrency }, strict) =>
  keyed(
    () => new PQueue({ concurrency, intervalCap: limit, interval: periodMs, strict }),
    (queue, work) => queue.add(work),
    (queue) => queue.size === 0 && queue.pending === 0,
  );

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
  'p-queue intervalCap': (pace) => Object.assign(pQueue(pace, false), { close() {} }),
  'p-queue intervalCap, strict': (pace) => Object.assign(pQueue(pace, true), { close() {} }),
};

function bottleneck(options) {
  const group = new Bottleneck.Group(options);
  return Object.assign((key, work) => group.key(key).schedule(work), {
    close: () => Promise.all(group.limiters().map(({ limiter }) => limiter.disconnect(false))),
  });
}
