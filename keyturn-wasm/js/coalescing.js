// Coalescing calls: a job queued by a call with `coalesce`, and the calls that joined it. The
// engine decides who joins what and whether a leaving caller was the job's last (then it gives
// the job up); this is what the callers are on the JavaScript side. Static JS, copied into pkg/
// by the build.

/** @typedef {import('./serializer.js').Job} Job */
/** @typedef {import('./serializer.js').TimedJob} TimedJob */

/** One caller of a coalescing job: the one that queued it, or one that joined it. */
export class Caller {
  /**
   * @param {Job} job
   * @param {AbortSignal | undefined} signal
   * @param {((value: unknown) => void) | undefined} onLateSettle
   */
  constructor(job, signal, onLateSettle) {
    this.job = job;
    this.signal = signal;
    this.onLateSettle = onLateSettle;
    /** @type {(value: unknown) => void} */
    this.resolve = ignore;
    /** @type {(error: unknown) => void} */
    this.reject = ignore;
    this.left = false; // its signal took it out
    /** @type {unknown} ... with this reason */
    this.leftWith = undefined;
    this.settled = false; // its promise settled (with the job, or as it left)
    /** @type {ReturnType<typeof setTimeout> | undefined} on Workers: its keep-alive timer */
    this.timer = undefined;
  }

  /** Its signal aborted: it alone leaves (the job, too, once nobody else waits for it). */
  handleEvent() {
    /** @type {Callers} */ (this.job.options?.callers).leave(this);
  }
}

/**
 * A resolver not yet had, and the handler that keeps a promise nobody awaits from being an
 * unhandled rejection (callers that await it still see it).
 * @param {unknown} _
 */
export function ignore(_) {}

/**
 * A coalescing job's callers, and its outcome: the job's own promise, which the serializer
 * watches as any job's. They settle together, in one synchronous step — the outcome first,
 * then each caller in the order they came — so every caller's handlers run before the key's
 * next work, with the same value or the same error object.
 *
 * On Workers (`inContext`) each waiting caller holds a keep-alive timer (a request whose only
 * wait is another request's promise is cancelled as hung), each is woken when the job may start
 * (whichever is still waiting starts it), and the caller that queued the job — whose request
 * carries the job's promises — hears its signal's reason when the work ends, not at once.
 */
export class Callers {
  /**
   * @param {string} group as the engine takes it (see `coalesceGroup`)
   * @param {boolean} inContext
   */
  constructor(group, inContext) {
    this.group = group;
    this.inContext = inContext;
    /** @type {Caller[]} */
    this.list = [];
    /** @type {(value: unknown) => void} */
    this.resolveOutcome = ignore;
    /** @type {(error: unknown) => void} */
    this.rejectOutcome = ignore;
    this.settled = false; // the job's outcome is known
    /** @param {unknown} value */
    this.resolve = (value) => this.settle(this.resolveOutcome, true, value);
    /** @param {unknown} error */
    this.reject = (error) => this.settle(this.rejectOutcome, false, error);
    /**
     * Every caller's `onLateSettle`, each heard once (what one throws is dropped).
     * @param {unknown} value
     */
    this.lateSettled = (value) => {
      for (const { onLateSettle } of this.list) {
        if (onLateSettle === undefined) continue;
        try {
          onLateSettle(value);
        } catch {
          // as for a job's own onLateSettle
        }
      }
    };
  }

  /**
   * The job settled (`ok`) or failed with `outcome`: its own promise is told (`told`), then each
   * caller in the order they came.
   * @param {(outcome: unknown) => void} told
   * @param {boolean} ok
   * @param {unknown} outcome
   */
  settle(told, ok, outcome) {
    this.settled = true;
    told(outcome);
    for (const caller of this.list) {
      Callers.done(caller);
      // A caller that left hears its own reason (already, unless it was made to wait).
      if (caller.left) caller.reject(caller.leftWith);
      else if (ok) caller.resolve(outcome);
      else caller.reject(outcome);
    }
  }

  /**
   * A caller's promise settles (with its job, or as it leaves): its listener and timer go.
   * @param {Caller} caller
   */
  static done(caller) {
    caller.settled = true;
    caller.signal?.removeEventListener('abort', caller);
    if (caller.timer !== undefined) {
      clearTimeout(caller.timer);
      caller.timer = undefined;
    }
  }

  /**
   * Takes over the resolvers of `job` (queued by this group's first call): from now on they
   * settle its promise and every caller.
   * @param {Job} job
   */
  settleWith(job) {
    this.resolveOutcome = job.resolve;
    this.rejectOutcome = job.reject;
    job.resolve = this.resolve;
    job.reject = this.reject;
  }

  /**
   * A caller of `job` — the one that queued it, or one that joined it: its own promise,
   * settled with the job or by its own signal.
   * @param {Job} job
   * @param {AbortSignal | undefined} signal
   * @param {((value: unknown) => void) | undefined} onLateSettle
   * @returns {Promise<unknown>}
   */
  add(job, signal, onLateSettle) {
    const caller = new Caller(job, signal, onLateSettle);
    this.list.push(caller);
    const promise = new Promise((resolve, reject) => {
      caller.resolve = resolve;
      caller.reject = reject;
    });
    promise.then(undefined, ignore);
    signal?.addEventListener('abort', caller);
    if (this.inContext) {
      this.keepAlive(caller);
      // A joined caller can start the job from its own request, should the first be gone.
      if (this.list.length > 1) /** @type {TimedJob} */ (job).follow();
    }
    return promise;
  }

  /**
   * A caller's signal aborted: that caller alone rejects with its reason. The job goes on for
   * the callers left, and is given up with its last.
   * @param {Caller} caller
   */
  leave(caller) {
    const { job } = caller;
    const signal = /** @type {AbortSignal} */ (caller.signal);
    const reason = signal.reason;
    signal.removeEventListener('abort', caller);
    caller.left = true;
    caller.leftWith = reason;
    job.leave(reason);
    // On Workers the first caller's request carries the job: it hears when the work ends.
    if (this.inContext && caller === this.list[0] && !this.settled) return;
    Callers.done(caller);
    caller.reject(reason);
  }

  /**
   * On Workers: (re-)arms a waiting caller's keep-alive timer, for its job's deadline length.
   * @param {Caller} caller
   */
  keepAlive(caller) {
    try {
      caller.timer = setTimeout(() => {
        if (!caller.settled) this.keepAlive(caller);
      }, caller.job.serializer.timeoutMs);
    } catch {
      // past a platform's timer quota: the caller waits all the same, unguarded against the check
      caller.timer = undefined;
    }
  }
}
