// The serializer's job and line model, shared by its schedulers (direct.js, in-context.js) and
// its turns (this file's `PlainTurns`, leased.js): what one call is, what one busy key is, and
// how a started job's work is called and its caller told.

const resolved = Promise.resolve();

/**
 * Queues `task` as a reaction to a settled promise: the place `queueMicrotask` would give it,
 * but this cannot throw, and on Node it costs no AsyncResource per call.
 */
export const microtask = (task) => {
  resolved.then(task);
};

/** Clears a timer; one that cannot be cleared fires into a job or serializer that ignores it. */
export const clear = (timer) => {
  try {
    clearTimeout(timer);
  } catch {
    // nothing to do: what it would have ended has ended
  }
};

// A job's life, as the JS sees it (the core keeps its own).
export const QUEUED = 0;
export const RUNNING = 1; // its turn came: deadline armed, controller made
export const DONE = 2; // its caller's promise settled
export const CANCELLED = 3; // its caller's signal aborted while it waited: out of the line

/**
 * What a call passed in its options, when it passed any. A coalescing job's are its group's:
 * its callers' signals and `onLateSettle` are theirs (see `Callers`), not the job's.
 */
export class CallOptions {
  constructor(signal, onLateSettle, timeoutMs, callers) {
    this.signal = signal; // the caller's
    this.onLateSettle = onLateSettle;
    this.timeoutMs = timeoutMs; // its own deadline in ms, or NaN for the serializer's
    this.callers = callers; // a coalescing job's Callers, else undefined
  }
}

/** One caller of a coalescing job: the one that queued it, or one that joined it. */
export class Caller {
  constructor(job, signal, onLateSettle) {
    this.job = job;
    this.signal = signal;
    this.onLateSettle = onLateSettle;
    this.resolve = undefined;
    this.reject = undefined;
    this.left = false; // its signal took it out
    this.leftWith = undefined; // ... with this reason
    this.settled = false; // its promise settled (with the job, or as it left)
    this.react = undefined; // with the in-context scheduler: its reaction to the job's turn
    this.timer = undefined; // with the in-context scheduler, a joined caller's keep-alive timer
  }

  /** Its signal aborted: it alone leaves (the job, too, once nobody else waits for it). */
  handleEvent() {
    this.job.line.serializer.leave(this);
  }
}

/**
 * A coalescing job's callers, and its outcome: the job's own promise, which its scheduler
 * watches as any job's. They settle together, in one synchronous step — the outcome first,
 * then each caller in the order they came — so every caller's handlers run before the key's
 * next work, with the same value or the same error object.
 */
export class Callers {
  constructor(group) {
    this.group = group; // as the core's wire takes it (see `coalesceGroup`)
    this.list = [];
    this.resolveOutcome = undefined;
    this.rejectOutcome = undefined;
    this.settled = false; // the job's outcome is known
    this.resolve = (value) => {
      this.settled = true;
      this.resolveOutcome(value);
      for (const caller of this.list) Callers.answer(caller, caller.resolve, value);
    };
    this.reject = (error) => {
      this.settled = true;
      this.rejectOutcome(error);
      for (const caller of this.list) Callers.answer(caller, caller.reject, error);
    };
    // Every caller's `onLateSettle`, each heard once (what one throws is dropped).
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

  static answer(caller, settle, outcome) {
    Callers.done(caller);
    // A caller that left hears its own reason (already, unless its scheduler made it wait).
    if (caller.left) caller.reject(caller.leftWith);
    else settle(outcome);
  }

  /** A caller's promise settles (with its job, or as it leaves): its listener and timer go. */
  static done(caller) {
    caller.settled = true;
    caller.signal?.removeEventListener('abort', caller);
    if (caller.timer !== undefined) {
      clear(caller.timer);
      caller.timer = undefined;
    }
  }

  /** Takes over `job`'s resolvers: from now on they settle its promise and every caller. */
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
}

/**
 * One call: its work, its caller's resolvers, and how far it got. A queued job lives until its
 * turn, and each of its fields is memory the young generation copies for every call waiting:
 * a call without options keeps eight.
 */
export class Job {
  constructor(line, work, options) {
    this.line = line;
    this.work = work;
    this.options = options; // a CallOptions, or undefined
    this.state = QUEUED;
    this.resolve = undefined;
    this.reject = undefined;
    this.controller = undefined; // the work's, made when it starts
    this.ticket = -1; // its entry in the core
  }

  /** Its deadline, in ms: its own, or the serializer's. */
  get timeoutMs() {
    const own = this.options?.timeoutMs;
    return own === undefined || Number.isNaN(own) ? this.line.serializer.timeoutMs : own;
  }

  /** The caller's signal, if it gave one (a coalescing job's callers each have their own). */
  get signal() {
    return this.options?.signal;
  }

  /** Whether it may leave its line before it settles: a caller's signal, or callers that may all leave. */
  get cancellable() {
    const options = this.options;
    return options !== undefined && (options.signal !== undefined || options.callers !== undefined);
  }

  /** The caller's signal aborted (the job is its EventListener object: no closure per job). */
  handleEvent() {
    this.line.serializer.abort(this, this.signal.reason);
  }
}

/** A busy key: its line in the core, and the job whose turn it is. */
export class Line {
  constructor(serializer, key, id) {
    this.serializer = serializer;
    this.key = key;
    this.id = id;
    this.current = undefined;
  }
}

/** What a work gets as its second argument; without a store there is no lease to fence. */
const NO_LEASE = Object.freeze({ fence: 0 });

/** Calls `work(signal, turn)` and settles the job's caller as the work does. */
export function callWork(job, turn) {
  const work = job.work;
  job.work = undefined;
  try {
    const value = work(job.controller.signal, turn);
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
      // Not a thenable: settled already, and nothing is left to abort.
      job.resolve(value);
      return;
    }
    // Not `resolve(value)`: that would lock the caller's promise to the work, and a timeout or
    // the caller's signal must still be able to reject it. The job's own resolvers: no closure
    // per work.
    const run = Promise.resolve(value);
    run.then(job.resolve, job.reject);
    if (job.options?.onLateSettle !== undefined) watchLate(job, run);
  } catch (error) {
    job.reject(error);
  }
}

/** Calls `work(signal, turn)`: a promise of its outcome (what it throws, a rejection). */
export function runWork(job, turn) {
  const work = job.work;
  job.work = undefined;
  try {
    return Promise.resolve(work(job.controller.signal, turn));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Reports a late settlement of an abandoned work to `onLateSettle` (what it throws is dropped). */
export function watchLate(job, run) {
  const { signal } = job.controller;
  const { serializer } = job.line;
  const onLateSettle = job.options.onLateSettle;
  const late = (value) => {
    if (!signal.aborted) return;
    serializer.lateSettled();
    try {
      onLateSettle(value);
    } catch {
      // a re-decision that cannot even be queued changes nothing; the next call decides
    }
  };
  run.then(late, () => late(undefined));
}

/**
 * A started job's turn without a store: its work, called at once. When the turn ends the
 * controller is let go — a job queued a while ago is in the old generation, and its pointer to
 * the young controller would keep the signal alive through every scavenge until the job itself
 * is collected.
 */
export const PlainTurns = Object.freeze({
  start(job) {
    callWork(job, NO_LEASE);
  },
  ended(job) {
    job.controller = undefined;
  },
  idle() {},
});
