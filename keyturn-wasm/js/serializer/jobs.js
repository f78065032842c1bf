// The serializer's job and line model, shared by its schedulers (direct.js, in-context.js) and
// its turns (this file's `PlainTurns`, leased.js): what one call is, what one busy key is, and
// how a started job's work is called and its caller told. Where a job is in its life is the
// core's to say (by ticket); a job keeps only what the host calls need.

/** @typedef {import('../serializer.js').Serializer} Serializer */
/** @typedef {import('./coalescing.js').Callers} Callers */
/** @typedef {{ readonly fence: number, readonly slot: number }} Turn */
/** @typedef {(signal: AbortSignal, turn: Turn) => unknown} Work */

const resolved = Promise.resolve();

/**
 * Queues `task` as a reaction to a settled promise: the place `queueMicrotask` would give it,
 * but this cannot throw, and on Node it costs no AsyncResource per call.
 * @param {() => void} task
 */
export const microtask = (task) => {
  resolved.then(task);
};

/**
 * What a call passed in its options, when it passed any. A coalescing job's are its group's:
 * its callers' signals and `onLateSettle` are theirs (see `Callers`), not the job's.
 */
export class CallOptions {
  /**
   * @param {AbortSignal | undefined} signal the caller's
   * @param {((value: unknown) => void) | undefined} onLateSettle
   * @param {Callers | undefined} callers a coalescing job's
   */
  constructor(signal, onLateSettle, callers) {
    this.signal = signal;
    this.onLateSettle = onLateSettle;
    this.callers = callers;
  }
}

/**
 * One call: its work, its caller's resolvers, its controller once it started, and its ticket
 * in the core. A queued job lives until its turn, and each of its fields is memory the young
 * generation copies for every call waiting: a call without options keeps eight.
 */
export class Job {
  /**
   * @param {Line | undefined} line set once its key's line is known
   * @param {Work | undefined} work
   * @param {CallOptions | undefined} options
   */
  constructor(line, work, options) {
    this.line = /** @type {Line} */ (line);
    this.work = work;
    this.options = options;
    /** @type {(value: unknown) => void} */
    this.resolve = ignore;
    /** @type {(error: unknown) => void} */
    this.reject = ignore;
    /** @type {AbortController | undefined} the work's, made when it starts */
    this.controller = undefined;
    this.ticket = -1; // its entry in the core
    this.slot = -1; // the number the core knows it by (see instance.js)
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
    this.line.serializer.abort(this, /** @type {AbortSignal} */ (this.signal).reason);
  }
}

/** A busy key: its line in the core, and the job whose turn it is. */
export class Line {
  /**
   * @param {Serializer} serializer
   * @param {string} key
   * @param {number} id
   */
  constructor(serializer, key, id) {
    this.serializer = serializer;
    this.key = key;
    this.id = id;
    /** @type {Job | undefined} */
    this.current = undefined;
  }
}

/** @param {unknown} _ */
function ignore(_) {}

/**
 * What a work gets as its second argument without a store: no lease to fence, and its key's
 * slot — one frozen object per slot, made when first used.
 * @type {Turn[]}
 */
const PLAIN_TURNS = [Object.freeze({ fence: 0, slot: 0 })];

/** @param {number} slot */
function plainTurn(slot) {
  return (PLAIN_TURNS[slot] ??= Object.freeze({ fence: 0, slot }));
}

/**
 * Calls `work(signal, turn)` and settles the job's caller as the work does.
 * @param {Job} job
 * @param {Turn} turn
 */
export function callWork(job, turn) {
  const work = /** @type {Work} */ (job.work);
  job.work = undefined;
  try {
    const value = work(/** @type {AbortController} */ (job.controller).signal, turn);
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

/**
 * Calls `work(signal, turn)`: a promise of its outcome (what it throws, a rejection).
 * @param {Job} job
 * @param {Turn} turn
 * @returns {Promise<unknown>}
 */
export function runWork(job, turn) {
  const work = /** @type {Work} */ (job.work);
  job.work = undefined;
  try {
    return Promise.resolve(work(/** @type {AbortController} */ (job.controller).signal, turn));
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Reports a late settlement of an abandoned work to `onLateSettle` (what it throws is dropped).
 * @param {Job} job
 * @param {Promise<unknown>} run
 */
export function watchLate(job, run) {
  const { signal } = /** @type {AbortController} */ (job.controller);
  const { serializer } = job.line;
  const onLateSettle = /** @type {(value: unknown) => void} */ (job.options?.onLateSettle);
  /** @param {unknown} value */
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
 * What a started job's turn does: run its work in its key's slot (with its key's lease first,
 * over a store), then end (its caller heard), and what a key gone idle leaves behind.
 * @typedef {object} Turns
 * @property {(job: Job, slot: number) => void} start
 * @property {(job: Job) => void} ended
 * @property {(line: Line) => void} idle
 */

/**
 * A started job's turn without a store: its work, called at once. When the turn ends the
 * controller is let go — a job queued a while ago is in the old generation, and its pointer to
 * the young controller would keep the signal alive through every scavenge until the job itself
 * is collected.
 * @type {Turns}
 */
export const PlainTurns = Object.freeze({
  /**
   * @param {Job} job
   * @param {number} slot
   */
  start(job, slot) {
    callWork(job, plainTurn(slot));
  },
  /** @param {Job} job */
  ended(job) {
    job.controller = undefined;
  },
  idle() {},
});
