// N at a time per key, as users build it from the libraries they pick instead of keyturn — each
// keyed the way its docs show, letting an idle key go (so memory stays bounded, as keyturn's
// does) — and the floor: a per-key counter and FIFO of waiters in plain JS with a signal per
// work. None of the libraries hands the work a signal, bounds it with a deadline or says which
// slot it runs in.
import pLimit from 'p-limit';
import { Sema } from 'async-sema';

import { keyed } from './peers.mjs';

export const semaphorePeers = {
  // p-limit: a limiter per key.
  'p-limit': (n) =>
    keyed(
      () => pLimit(n),
      (limit, work) => limit(work),
      (limit) => limit.activeCount === 0 && limit.pendingCount === 0,
    ),
  // async-sema: a semaphore per key, acquired around the work; it says nothing of its holders,
  // so each key counts its own calls.
  'async-sema': (n) =>
    keyed(
      () => ({ sema: new Sema(n), calls: 0 }),
      async (entry, work) => {
        entry.calls += 1;
        await entry.sema.acquire();
        try {
          return await work();
        } finally {
          entry.sema.release();
          entry.calls -= 1;
        }
      },
      (entry) => entry.calls === 0,
    ),
  // The floor: per key, how many run and who waits (a FIFO read from a moving head), and one
  // AbortController per work — the one cost no implementation that hands out a real signal
  // avoids (as bench/serializer.mjs's floor) — and nothing else: no deadline, no slot.
  floor: (n) => {
    const keys = new Map();
    const next = (key, state) => {
      if (state.head < state.waiting.length) {
        const waiter = state.waiting[state.head];
        state.waiting[state.head++] = undefined;
        if (state.head === state.waiting.length) {
          state.waiting.length = 0;
          state.head = 0;
        }
        waiter();
      } else if (--state.running === 0) keys.delete(key);
    };
    return async (key, work) => {
      let state = keys.get(key);
      if (state === undefined) {
        state = { running: 0, waiting: [], head: 0 };
        keys.set(key, state);
      }
      if (state.running < n) state.running += 1;
      else await new Promise((resolve) => state.waiting.push(resolve));
      try {
        return await work(new AbortController().signal);
      } finally {
        next(key, state);
      }
    };
  },
};
