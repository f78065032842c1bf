// Coalescing calls: a job queued by a call with `coalesce`, and the calls that joined it. The
// core decides who joins what (`join`) and whether a leaving caller was the job's last
// (`leave`); this is what the callers are on the JavaScript side. Each scheduler that needs more
// (in-context.js) extends `Callers` in one place.

/** @typedef {import('./jobs.js').Job} Job */

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
    /** @type {(() => void) | undefined} with the in-context scheduler: its reaction to the job's turn */
    this.react = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} with the in-context scheduler: its keep-alive timer */
    this.timer = undefined;
  }

  /** Its signal aborted: it alone leaves (the job, too, once nobody else waits for it). */
  handleEvent() {
    /** @type {Callers} */ (this.job.options?.callers).leave(this);
  }
}

/** @param {unknown} _ */
function ignore(_) {}

/** A promise nobody awaits must not be an unhandled rejection; callers that await it still see it. */
const handled = () => {};

/**
 * A coalescing job's callers, and its outcome: the job's own promise, which its scheduler
 * watches as any job's. They settle together, in one synchronous step — the outcome first,
 * then each caller in the order they came — so every caller's handlers run before the key's
 * next work, with the same value or the same error object.
 */
export class Callers {
  /** @param {string} group as the core takes it (see `coalesceGroup`) */
  constructor(group) {
    this.group = group;
    /** @type {Caller[]} */
    this.list = [];
    /** @type {(value: unknown) => void} */
    this.resolveOutcome = ignore;
    /** @type {(error: unknown) => void} */
    this.rejectOutcome = ignore;
    this.settled = false; // the job's outcome is known
    /** @param {unknown} value */
    this.resolve = (value) => {
      this.settled = true;
      this.resolveOutcome(value);
      for (const caller of this.list) Callers.answer(caller, caller.resolve, value);
    };
    /** @param {unknown} error */
    this.reject = (error) => {
      this.settled = true;
      this.rejectOutcome(error);
      for (const caller of this.list) Callers.answer(caller, caller.reject, error);
    };
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
   * @param {Caller} caller
   * @param {(outcome: unknown) => void} settle
   * @param {unknown} outcome
   */
  static answer(caller, settle, outcome) {
    Callers.done(caller);
    // A caller that left hears its own reason (already, unless its scheduler made it wait).
    if (caller.left) caller.reject(caller.leftWith);
    else settle(outcome);
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

  /** The first caller, the one that queued the job. */
  get first() {
    return this.list[0];
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
    if (this.list.length > 1) this.follow(caller);
    const promise = new Promise((resolve, reject) => {
      caller.resolve = resolve;
      caller.reject = reject;
    });
    promise.then(undefined, handled);
    signal?.addEventListener('abort', caller);
    this.waiting(caller);
    return promise;
  }

  /**
   * A caller's signal aborted: that caller alone rejects with its reason. The job goes on for
   * the callers left, and leaves its line (or is abandoned) with its last.
   * @param {Caller} caller
   */
  leave(caller) {
    const { job } = caller;
    const signal = /** @type {AbortSignal} */ (caller.signal);
    const reason = signal.reason;
    signal.removeEventListener('abort', caller);
    caller.left = true;
    caller.leftWith = reason;
    const serializer = job.line.serializer;
    const others = serializer.leave(job);
    if (others === undefined) return; // the instance failed: its failure tells every caller
    if (!others) serializer.abort(job, reason);
    // Out of the work, but its promise waits for the work's end (see the scheduler's rule).
    else if (!this.leavesAtOnce(caller)) return;
    Callers.done(caller);
    caller.reject(reason);
  }

  /**
   * A caller that joined a waiting job follows the job's turn: nothing to do here, the job
   * starts as any (a scheduler whose jobs start from their callers' reactions adds one).
   * @param {Caller} _caller
   */
  follow(_caller) {}

  /**
   * A caller waits for the job: nothing to do here.
   * @param {Caller} _caller
   */
  waiting(_caller) {}

  /**
   * Whether a caller whose signal aborted, with other callers still waiting, rejects at once.
   * @param {Caller} _caller
   */
  leavesAtOnce(_caller) {
    return true;
  }
}
