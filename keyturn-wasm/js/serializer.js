// createKeyedSerializer over the serializer's wasm module (keyturn_wasm). Static JS, copied into
// pkg/ by the build; the entries initialise the module before anything here runs.
//
// The core (Rust, `SerializerBinding`) holds each busy key's line of jobs, their deadlines, the
// counters and, with a store, the leases its turns left; it decides every rule, default and
// deadline. The JS makes every host call — promises, AbortControllers, timers, the works — on
// what it answers. The core never calls into JavaScript, so a host call that throws (a timer
// refused past a platform's quota, an AbortController that cannot be made) is an ordinary
// error here, with no Rust state half changed.
//
// A `Serializer` (this file) takes the calls: it checks them, queues their jobs, and handles
// the caller's signal, the counters and a failed instance. It hands each job to a scheduler,
// which decides when the job starts and arms its deadline's timer — `DirectScheduler` (one
// timer for all; Node, browsers, Deno) or `InContextScheduler` (Cloudflare Workers, where each
// work must start from its own caller's request, with a timer of its own) — and each started
// job to its turns: `PlainTurns` calls the work; `LeasedTurns` (with a `store`) takes the key's
// lease first. A coalescing call's callers are its scheduler's `Callers` (coalescing.js).
//
// Microtask order is that of `keyed-serializer.js`, the per-key serializer keyturn is a drop-in
// for: the handlers a caller attached to a work's promise run before the next work of its key
// starts. A work is called two microtasks after its turn comes (the previous work's promise
// settled, or an idle key was called), as that serializer's `previous.then(() => bounded(…))`
// and `Promise.resolve().then(work)` do.
import * as glue from './keyturn_wasm.js';
import { InstanceHost } from './instance.js';
import { SerializedWorkTimeout, SerializedQueueFull } from './errors.js';
import {
  MAX_CONCURRENCY,
  MAX_TIMEOUT_MS,
  MESSAGES,
  SERIALIZER_ABANDONED,
  SERIALIZER_BAD_CONCURRENCY,
  SERIALIZER_BAD_MAX_PENDING,
  SERIALIZER_BAD_TIMEOUT,
  SERIALIZER_IDLE,
  SERIALIZER_IDLE_LINE,
  SERIALIZER_KEY_EMPTY,
  SERIALIZER_KEY_TOO_LONG,
  SERIALIZER_LEFT,
  SERIALIZER_QUEUE_FULL,
  STATS,
} from './constants.js';
import {
  OptionNames,
  checkKey,
  coalesceGroup,
  keyError,
  leaseOptionError,
  leaseOptions,
  optionalFunction,
  optionalNumber,
  optionalSignal,
  rangeError,
  wrongType,
} from './arguments.js';
import { CallOptions, Job, Line, PlainTurns } from './serializer/jobs.js';
import { LeasedTurns } from './serializer/leased.js';

/** @typedef {import('./serializer/jobs.js').Work} Work */
/** @typedef {import('./serializer/jobs.js').Turns} Turns */
/** @typedef {import('./serializer/coalescing.js').Callers} Callers */
/** @typedef {import('./keyturn_wasm.js').SerializerBinding} SerializerBinding */
/** @typedef {import('./instance.js').Instance} Instance */
/** @typedef {ReturnType<import('./lock.js').lockApi>} LockApi */

/**
 * What a scheduler is to its serializer: when jobs start, and their deadlines' timers.
 * @typedef {object} Scheduler
 * @property {(key: string, id: number) => Line} newLine
 * @property {(line: Line | undefined, work: Work, options: CallOptions | undefined) => Job} newJob
 * @property {(group: string) => Callers} newCallers
 * @property {(line: Line) => void} opened
 * @property {(job: Job, result: Promise<unknown>, opened: boolean) => void} entered
 * @property {(job: Job, change: number) => void} cancelled
 * @property {() => void} idle
 */

/**
 * @typedef {{ new (serializer: Serializer): Scheduler, sharedTimer: boolean }} SchedulerClass
 */

const { SerializerBinding: Binding } = glue;

/** @type {InstanceHost | undefined} */
let host;
/** The serializer module's live instance (a fresh one after a failure, where possible). */
function liveInstance() {
  host ??= new InstanceHost(glue, settleHeld);
  return host.current();
}

const SERIALIZER_OPTIONS = new OptionNames(['timeoutMs', 'maxPending', 'concurrency', 'store', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs']);
const CALL_OPTIONS = new OptionNames(['signal', 'onLateSettle', 'timeoutMs', 'coalesce']);

const ignore = () => {};

/**
 * A rejected promise for a refused call. Handled here, as every result is in
 * `keyed-serializer.js` (its tail handles each one): a rejection nobody awaits is never an
 * unhandled rejection; callers that await it still see it.
 * @param {unknown} error
 */
function refused(error) {
  const result = Promise.reject(error);
  result.then(undefined, ignore);
  return result;
}

/**
 * A `timeoutMs` the core refused.
 * @param {string} what
 * @param {unknown} value
 */
const timeoutError = (what, value) => rangeError(MESSAGES.timeoutRange, { what, max: MAX_TIMEOUT_MS, value });

/**
 * @typedef {object} SerializerOptions
 * @property {number} [timeoutMs]
 * @property {number} [maxPending]
 * @property {number} [concurrency]
 * @property {object} [store]
 * @property {number} [staleMs]
 * @property {number} [maxClockSkewMs]
 * @property {number} [storeTimeoutMs]
 */

/**
 * @typedef {object} CallOptionsGiven
 * @property {AbortSignal} [signal]
 * @property {(value: unknown) => void} [onLateSettle]
 * @property {number} [timeoutMs]
 * @property {boolean | string} [coalesce]
 */

export class Serializer {
  /**
   * Throws the TypeError or RangeError naming a bad option.
   * @param {SerializerOptions | undefined} options
   * @param {SchedulerClass} Scheduler
   * @param {LockApi} locks
   */
  constructor(options, Scheduler, locks) {
    SERIALIZER_OPTIONS.check(options, 'options');
    const timeoutMs = optionalNumber(options?.timeoutMs, 'options.timeoutMs');
    const maxPending = optionalNumber(options?.maxPending, 'options.maxPending');
    const concurrency = optionalNumber(options?.concurrency, 'options.concurrency');
    const store = options?.store;
    const lease = leaseOptions(options, undefined, concurrency);
    const code = Binding.checkOptions(timeoutMs, maxPending, concurrency);
    if (code === SERIALIZER_BAD_TIMEOUT) throw timeoutError('options.timeoutMs', timeoutMs);
    if (code === SERIALIZER_BAD_MAX_PENDING) throw rangeError(MESSAGES.maxPendingRange, { what: 'options.maxPending', value: maxPending });
    const what = { what: 'options.concurrency', max: MAX_CONCURRENCY, value: concurrency };
    if (code === SERIALIZER_BAD_CONCURRENCY) throw rangeError(MESSAGES.concurrencyRange, what);
    /** @type {Turns} */
    let turns = PlainTurns;
    if (store !== undefined) {
      // Its lock manager (a TypeError for a store that is not one), then the lease's ranges.
      const manager = locks.storeManager(store, 'options.store');
      const refused = Binding.checkLease(lease.staleMs, lease.maxClockSkewMs, lease.storeTimeoutMs);
      if (refused !== 0) throw leaseOptionError(refused, lease);
      turns = new LeasedTurns(this, manager, lease);
    }
    /** @type {Instance} */
    this.instance = liveInstance();
    /** @type {SerializerBinding} */
    this.core = new Binding(
      timeoutMs,
      maxPending,
      concurrency,
      Scheduler.sharedTimer,
      store !== undefined,
      lease.staleMs,
      lease.maxClockSkewMs,
      lease.storeTimeoutMs,
    );
    /** Whether several works of a key may run at once (`concurrency` above 1). */
    this.parallel = this.core.concurrency() > 1;
    /** @type {Map<string, Line>} */
    this.lines = new Map();
    this.turns = turns;
    /** @type {Scheduler} */
    this.scheduler = new Scheduler(this);
  }

  /**
   * A call into the core threw: a trap fails the instance (see instance.js), and every job
   * still waiting in it is told — a started one settles with its work.
   * @param {unknown} error
   */
  failed(error) {
    return this.instance.failed(error);
  }

  /**
   * `serialize(key, work, options)`: its caller's promise.
   * @param {string} key
   * @param {Work} work
   * @param {CallOptionsGiven | undefined} options
   * @returns {Promise<unknown>}
   */
  serialize(key, work, options) {
    if (this.instance.failure !== undefined) return refused(this.instance.failure);
    try {
      return this.enter(key, work, options);
    } catch (error) {
      return refused(this.failed(error));
    }
  }

  /**
   * Checks a call and queues it: the promise its caller gets — its job's, a coalescing
   * caller's, or a refusal's. Throws for bad arguments.
   * @param {string} key
   * @param {Work} work
   * @param {CallOptionsGiven | undefined} options
   * @returns {Promise<unknown>}
   */
  enter(key, work, options) {
    if (typeof work !== 'function') throw wrongType('work', 'a function', work);
    if (options === undefined) return this.queue(key, work, undefined, undefined, undefined);
    CALL_OPTIONS.check(options, 'options');
    const signal = optionalSignal(options.signal, 'options.signal');
    const onLateSettle = optionalFunction(options.onLateSettle, 'options.onLateSettle');
    const timeoutMs = optionalNumber(options.timeoutMs, 'options.timeoutMs');
    const group = coalesceGroup(options.coalesce, 'options.coalesce');
    if (signal?.aborted) {
      this.checkCall(key, timeoutMs);
      return refused(signal.reason);
    }
    if (group !== undefined) return this.coalesce(key, work, group, timeoutMs, signal, onLateSettle);
    const call = signal !== undefined || onLateSettle !== undefined ? new CallOptions(signal, onLateSettle, undefined) : undefined;
    return this.queue(key, work, call, timeoutMs, undefined);
  }

  /**
   * A coalescing call: it joins the key's last job if the core says it may, else queues one that
   * later calls of its group may join.
   * @param {string} key
   * @param {Work} work
   * @param {string} group
   * @param {number | undefined} timeoutMs
   * @param {AbortSignal | undefined} signal
   * @param {((value: unknown) => void) | undefined} onLateSettle
   */
  coalesce(key, work, group, timeoutMs, signal, onLateSettle) {
    const line = this.lines.get(key);
    if (line !== undefined) {
      const slot = this.core.join(line.id, group, timeoutMs);
      const joined = slot === undefined ? undefined : this.job(slot);
      const callers = joined?.options?.callers;
      if (joined !== undefined && callers !== undefined) return callers.add(joined, signal, onLateSettle);
    }
    // Its signal and onLateSettle are its caller's, not the job's.
    const callers = this.scheduler.newCallers(group);
    return this.queue(key, work, new CallOptions(undefined, callers.lateSettled, callers), timeoutMs, group, signal, onLateSettle);
  }

  /**
   * Queues a job for the call: its caller's promise (a coalescing job's first caller's), or a
   * refusal's.
   * @param {string} key
   * @param {Work} work
   * @param {CallOptions | undefined} call
   * @param {number | undefined} timeoutMs its own deadline, or the serializer's
   * @param {string | undefined} group
   * @param {AbortSignal} [signal] a coalescing job's first caller's
   * @param {(value: unknown) => void} [onLateSettle] ... and its onLateSettle
   * @returns {Promise<unknown>}
   */
  queue(key, work, call, timeoutMs, group, signal, onLateSettle) {
    const { instance } = this;
    let line = this.lines.get(key);
    let job;
    const opened = line === undefined;
    if (line !== undefined) {
      job = this.scheduler.newJob(line, work, call);
      job.slot = instance.hold(job);
      const ticket = this.core.enqueueOn(line.id, job.slot, timeoutMs, group);
      if (ticket < 0) {
        instance.letGo(job.slot);
        return this.refusal(ticket, key, timeoutMs);
      }
      job.ticket = ticket;
    } else {
      checkKey(key, 'key');
      job = this.scheduler.newJob(undefined, work, call);
      job.slot = instance.hold(job);
      const id = this.core.open(key, job.slot, timeoutMs, group);
      if (id < 0) {
        instance.letGo(job.slot);
        return this.refusal(id, key, timeoutMs);
      }
      line = this.scheduler.newLine(key, id);
      this.lines.set(key, line);
      job.line = line;
      job.ticket = this.core.headTicket(id);
      this.scheduler.opened(line);
    }
    const result = new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
    });
    const callers = call?.callers;
    if (callers !== undefined) callers.settleWith(job);
    this.scheduler.entered(job, result, opened);
    return callers === undefined ? result : callers.add(job, signal, onLateSettle);
  }

  /**
   * The job the core knows as `slot`.
   * @param {number} slot
   */
  job(slot) {
    return /** @type {Job} */ (this.instance.get(slot));
  }

  /**
   * A job left its line: the core no longer knows it.
   * @param {Job} job
   */
  left(job) {
    this.instance.letGo(job.slot);
  }

  /**
   * Checks a call refused before it queues (its signal had aborted), whose bad arguments must
   * still be reported.
   * @param {string} key
   * @param {number | undefined} timeoutMs
   */
  checkCall(key, timeoutMs) {
    checkKey(key, 'key');
    const code = Binding.checkCall(key, timeoutMs);
    if (code !== 0) this.refusal(code, key, timeoutMs);
  }

  /**
   * What the core's refusal `code` means: a refused call's promise, or a thrown error for a
   * bad argument.
   * @param {number} code
   * @param {string} key
   * @param {number | undefined} timeoutMs
   * @returns {Promise<never>}
   */
  refusal(code, key, timeoutMs) {
    if (code === SERIALIZER_QUEUE_FULL) return refused(new SerializedQueueFull(key, this.core.maxPending()));
    if (code === SERIALIZER_BAD_TIMEOUT) throw timeoutError('options.timeoutMs', timeoutMs);
    if (code === SERIALIZER_KEY_EMPTY || code === SERIALIZER_KEY_TOO_LONG) throw keyError('key', key, code === SERIALIZER_KEY_EMPTY);
    if (code === SERIALIZER_IDLE_LINE) throw new Error('keyturn: the line of a busy key went idle unseen'); // a bug
    throw rangeError(MESSAGES.tooManyWorks, {});
  }

  /**
   * A started job whose controller could be made goes to its turns: the work, or its lease first.
   * @param {Job} job
   * @param {number} slot the key's slot it runs in
   */
  begin(job, slot) {
    try {
      job.controller = new AbortController();
    } catch (error) {
      job.reject(error);
      return;
    }
    this.turns.start(job, slot);
  }

  /**
   * A line's change (bits from the core). Gone idle: the line goes, its lease is let go, and
   * with nothing queued anywhere the scheduler's timer too. Answers whether it went idle.
   * @param {Line} line
   * @param {number} change
   */
  lineChanged(line, change) {
    if ((change & SERIALIZER_IDLE) === 0) return false;
    this.turns.idle(line);
    if (this.lines.get(line.key) === line) this.lines.delete(line.key);
    if (this.lines.size === 0) this.scheduler.idle();
    return true;
  }

  /**
   * Tells an abandoned running job and its caller: as `keyed-serializer.js` does, abort first,
   * then reject — with the host's error when no timer could bound it.
   * @param {Job} job
   * @param {unknown} [hostError]
   */
  timeOut(job, hostError) {
    let timeoutMs;
    try {
      timeoutMs = this.core.timeoutOf(job.ticket);
    } catch (error) {
      this.failed(error);
    }
    try {
      job.controller?.abort(hostError);
    } catch {
      // listeners' errors are the host's to report
    }
    job.reject(hostError ?? new SerializedWorkTimeout(job.line.key, timeoutMs));
  }

  /**
   * The deadline of a running job passed (its own timer's, or its lease wait's).
   * @param {Job} job
   */
  timeOutNow(job) {
    try {
      if (!this.core.timeOut(job.ticket)) return;
    } catch (error) {
      this.failed(error);
      return;
    }
    this.timeOut(job);
  }

  /**
   * The job's caller gave up (its signal, with `reason`; for a coalescing job, its last
   * caller): a waiting job leaves its line, a running one is abandoned.
   * @param {Job} job
   * @param {unknown} reason
   */
  abort(job, reason) {
    let code;
    try {
      code = this.core.giveUp(job.ticket);
    } catch (error) {
      this.failed(error);
      return;
    }
    if (code & SERIALIZER_LEFT) {
      this.left(job);
      job.signal?.removeEventListener('abort', job);
      job.reject(reason);
      this.scheduler.cancelled(job, code);
    } else if (code & SERIALIZER_ABANDONED) {
      try {
        job.controller?.abort(reason);
      } catch {
        // listeners' errors are the host's to report
      }
      job.reject(reason);
    }
  }

  /**
   * One caller of a coalescing job left it: whether others remain (`undefined` when the
   * instance failed).
   * @param {Job} job
   * @returns {boolean | undefined}
   */
  leave(job) {
    try {
      return this.core.leave(job.ticket);
    } catch (error) {
      this.failed(error);
      return undefined;
    }
  }

  /** An abandoned work settled after all. */
  lateSettled() {
    try {
      this.core.lateSettled();
    } catch (error) {
      this.failed(error);
    }
  }

  /**
   * @param {string | undefined} key
   * @param {boolean} all
   */
  pending(key, all) {
    if (this.instance.failure !== undefined) throw this.instance.failure;
    try {
      if (all) return this.core.keys();
      const line = this.lines.get(/** @type {string} */ (key));
      return line === undefined ? 0 : this.core.pendingIn(line.id);
    } catch (error) {
      throw this.failed(error);
    }
  }

  stats() {
    if (this.instance.failure !== undefined) throw this.instance.failure;
    let values;
    try {
      values = this.core.stats();
    } catch (error) {
      throw this.failed(error);
    }
    /** @type {Record<string, number>} */
    const stats = {};
    for (let i = 0; i < STATS.length; i++) stats[STATS[i]] = values[i];
    return stats;
  }
}

/**
 * Told, for each JS value a failed instance held: a job that never started is rejected with
 * the failure, and never runs (one that started settles with its work).
 * @param {unknown} value
 * @param {Error} failure
 */
function settleHeld(value, failure) {
  if (value instanceof Job && value.controller === undefined) value.reject(failure);
}

/**
 * The package's `createKeyedSerializer`, for a platform: `Scheduler` starts its jobs and times
 * their deadlines, `locks` is the lock API whose managers a serializer with a store uses.
 *
 * createKeyedSerializer({ timeoutMs, maxPending, store, staleMs }) → serialize(key, work, { signal, timeoutMs, onLateSettle })
 *
 * `serialize(key, work)` runs `work(signal, turn)` once every work previously queued for `key`
 * has settled, and resolves or rejects as `work` does — or rejects with a
 * `SerializedWorkTimeout` (and aborts `signal`) when `work` has not settled within its deadline;
 * `onLateSettle(value)` is then called if and when that abandoned work settles.
 * `serialize.pending()` is the number of keys with queued or running work, `pending(key)` the
 * works of one key, `stats()` the counters.
 * @param {SchedulerClass} Scheduler
 * @param {LockApi} locks
 */
export function serializerApi(Scheduler, locks) {
  /** @param {SerializerOptions} [options] */
  return function createKeyedSerializer(options) {
    const serializer = new Serializer(options, Scheduler, locks);
    /**
     * @param {string} key
     * @param {Work} work
     * @param {CallOptionsGiven} [callOptions]
     */
    const serialize = (key, work, callOptions) => serializer.serialize(key, work, callOptions);
    /** @param {string} [key] */
    serialize.pending = function pending(key) {
      return serializer.pending(key, arguments.length === 0);
    };
    serialize.stats = () => serializer.stats();
    return serialize;
  };
}
