// createKeyedSerializer over the serializer's wasm module (keyturn_wasm). Static JS, copied into
// pkg/ by the build; the entries initialise the module before anything here runs.
//
// The core (Rust, `SerializerBinding`) holds each busy key's line of jobs, their deadlines and
// the counters, and decides; the JS makes every host call — promises, AbortControllers, timers,
// the works — on what it answers. The core never calls into JavaScript, so a host call that
// throws (a timer refused past a platform's quota, an AbortController that cannot be made) is
// an ordinary error here, with no Rust state half changed.
//
// A `Serializer` (this file) takes the calls: it checks them, queues their jobs, and handles
// the caller's signal, the counters and a failed instance. It hands each job to a scheduler,
// which decides when the job starts and times its deadline — `DirectScheduler` (one timer for
// all; Node, browsers, Deno) or `InContextScheduler` (Cloudflare Workers, where each work must
// start from its own caller's request, with a timer of its own) — and each started job to its
// turns: `PlainTurns` calls the work; `LeasedTurns` (with a `store`) takes the key's lease first.
//
// Microtask order is the reference's: the handlers a caller attached to a work's promise run
// before the next work of its key starts. A work is called two microtasks after its turn comes
// (the previous work's promise settled, or an idle key was called), as `keyed-serializer.js`'s
// `previous.then(() => bounded(…))` and `Promise.resolve().then(work)` do.
import * as glue from './keyturn_wasm.js';
import { InstanceHost } from './instance.js';
import { SerializedWorkTimeout, SerializedQueueFull } from './errors.js';
import {
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  MESSAGES,
  SERIALIZER_BAD_TIMEOUT,
  SERIALIZER_IDLE,
  SERIALIZER_IDLE_LINE,
  SERIALIZER_KEY_EMPTY,
  SERIALIZER_KEY_TOO_LONG,
  SERIALIZER_NOT_WAITING,
  SERIALIZER_QUEUE_FULL,
  STATS,
} from './constants.js';
import { OptionNames, checkKey, coalesceGroup, keyError, leaseOptions, optionalFunction, optionalNumber, optionalSignal, rangeError, wrongType } from './arguments.js';
import { CANCELLED, CallOptions, Caller, Callers, Job, PlainTurns, QUEUED, RUNNING } from './serializer/jobs.js';
import { LeasedTurns } from './serializer/leased.js';

const { SerializerBinding: Binding } = glue;

let host;
/** The serializer module's live instance (a fresh one after a failure, where possible). */
function liveInstance() {
  host ??= new InstanceHost(glue);
  return host.current();
}

const SERIALIZER_OPTIONS = new OptionNames(['timeoutMs', 'maxPending', 'store', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs']);
const CALL_OPTIONS = new OptionNames(['signal', 'onLateSettle', 'timeoutMs', 'coalesce']);

const ignore = () => {};

/**
 * A rejected promise for a refused call. Handled here, as every result is in the reference
 * (its tail handles each one): a rejection nobody awaits is never an unhandled rejection;
 * callers that await it still see it.
 */
function refused(error) {
  const result = Promise.reject(error);
  result.then(undefined, ignore);
  return result;
}

/** What a call answers instead of a job: refused before anything was queued. */
class Refusal {
  constructor(error) {
    this.error = error;
  }
}

/** A `timeoutMs` the core refused. */
const timeoutError = (what, value) => rangeError(MESSAGES.timeoutRange, { what, max: MAX_TIMEOUT_MS, value });

class Serializer {
  /** Throws the TypeError or RangeError naming a bad option. */
  constructor(options, Scheduler, locks) {
    SERIALIZER_OPTIONS.check(options, 'options');
    const timeoutMs = optionalNumber(options?.timeoutMs, 'options.timeoutMs', DEFAULT_TIMEOUT_MS);
    const maxPending = optionalNumber(options?.maxPending, 'options.maxPending', Infinity);
    const store = options?.store;
    // The turns' lease options; each turn's wait is its deadline.
    const lease = leaseOptions(options, NaN);
    const code = Binding.checkOptions(timeoutMs, maxPending);
    if (code === SERIALIZER_BAD_TIMEOUT) throw timeoutError('options.timeoutMs', timeoutMs);
    if (code !== 0) throw rangeError(MESSAGES.maxPendingRange, { what: 'options.maxPending', value: maxPending });
    // With a store: its lock manager (a TypeError for a store that is not one) and the leases.
    const turns = store === undefined ? PlainTurns : new LeasedTurns(this, locks.storeManager(store, 'options.store'), lease);
    this.instance = liveInstance();
    // With a store a work is called once it holds its key's lease: `stats().started` counts it then.
    this.core = new Binding(timeoutMs, maxPending, Scheduler.sharedTimer, store === undefined);
    this.timeoutMs = timeoutMs;
    this.maxPending = maxPending;
    this.lines = new Map();
    this.turns = turns;
    this.scheduler = new Scheduler(this);
    this.settleHeld = (value, failure) => {
      // A waiting job in a failed instance: its caller is told, and it never runs.
      if (value instanceof Job && value.state === QUEUED) {
        value.state = CANCELLED;
        value.reject(failure);
      }
    };
  }

  /** A call into the core threw: a trap fails the instance (see instance.js). */
  failed(error) {
    return this.instance.failed(error, this.settleHeld);
  }

  /** `serialize(key, work, options)`: its caller's promise. */
  serialize(key, work, options) {
    if (this.instance.failure !== undefined) return refused(this.instance.failure);
    let entry;
    try {
      entry = this.enter(key, work, options);
    } catch (error) {
      return refused(this.failed(error));
    }
    if (entry instanceof Refusal) return refused(entry.error);
    if (entry instanceof Caller) return this.callerPromise(entry);
    const job = entry;
    const result = new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
    });
    const callers = job.options?.callers;
    if (callers !== undefined) callers.settleWith(job);
    this.scheduler.entered(job, result);
    return callers === undefined ? result : this.callerPromise(callers.first);
  }

  /**
   * A coalescing job's caller's own promise: settled with the job, or by its own signal.
   * Handled here, as every result is (see `refused`).
   */
  callerPromise(caller) {
    const promise = new Promise((resolve, reject) => {
      caller.resolve = resolve;
      caller.reject = reject;
    });
    promise.then(undefined, ignore);
    caller.signal?.addEventListener('abort', caller);
    this.scheduler.waiting(caller);
    return promise;
  }

  /**
   * Checks a call and queues its job: the job, a Caller (a coalescing call that joined the
   * key's last job, or queued a job others may join), or a Refusal. Throws for bad arguments.
   */
  enter(key, work, options) {
    if (typeof work !== 'function') throw wrongType('work', 'a function', work);
    let call;
    let signal;
    let onLateSettle;
    let group;
    let timeoutMs = NaN;
    if (options !== undefined) {
      CALL_OPTIONS.check(options, 'options');
      signal = optionalSignal(options.signal, 'options.signal');
      onLateSettle = optionalFunction(options.onLateSettle, 'options.onLateSettle');
      const ownTimeout = options.timeoutMs;
      timeoutMs = optionalNumber(ownTimeout, 'options.timeoutMs', NaN);
      if (ownTimeout !== undefined && Number.isNaN(ownTimeout)) throw timeoutError('options.timeoutMs', ownTimeout);
      group = coalesceGroup(options.coalesce, 'options.coalesce');
      if (signal !== undefined && signal.aborted) {
        if (!this.lines.has(key)) this.checkKey(key);
        return new Refusal(signal.reason);
      }
      if (group !== undefined) {
        // Its signal and onLateSettle are its caller's, not the job's.
        const callers = new Callers(group);
        call = new CallOptions(undefined, callers.lateSettled, timeoutMs, callers);
      } else if (signal !== undefined || onLateSettle !== undefined || !Number.isNaN(timeoutMs)) {
        call = new CallOptions(signal, onLateSettle, timeoutMs, undefined);
      }
    }
    let line = this.lines.get(key);
    let job;
    if (line !== undefined) {
      if (group !== undefined) {
        const joined = this.core.join(line.id, group, timeoutMs);
        if (typeof joined === 'number') return this.refusal(joined, key, timeoutMs);
        if (joined !== undefined) return this.joined(joined, signal, onLateSettle);
      }
      job = this.scheduler.newJob(line, work, call);
      const ticket = this.core.enqueueOn(line.id, job, timeoutMs, group);
      if (ticket < 0) return this.refusal(ticket, key, timeoutMs);
      job.ticket = ticket;
    } else {
      checkKey(key, 'key');
      job = this.scheduler.newJob(undefined, work, call);
      const id = this.core.open(key, job, timeoutMs, group);
      if (id < 0) return this.refusal(id, key, timeoutMs);
      line = this.scheduler.newLine(key, id);
      this.lines.set(key, line);
      job.line = line;
      job.ticket = this.core.headTicket(id);
      this.scheduler.opened(line);
    }
    if (group === undefined) return job;
    call.callers.list.push(new Caller(job, signal, onLateSettle));
    return job;
  }

  /** A call that joined the waiting `job`: its caller, one more the job answers. */
  joined(job, signal, onLateSettle) {
    const caller = new Caller(job, signal, onLateSettle);
    job.options.callers.list.push(caller);
    this.scheduler.joined(caller);
    return caller;
  }

  /** A key checked as the core would queue it (for a call refused before it queues). */
  checkKey(key) {
    checkKey(key, 'key');
    const code = Binding.checkKey(key);
    if (code !== 0) throw keyError('key', key, code === SERIALIZER_KEY_EMPTY);
  }

  /** What the core's refusal `code` means: a Refusal, or a thrown error for a bad argument. */
  refusal(code, key, timeoutMs) {
    if (code === SERIALIZER_QUEUE_FULL) return new Refusal(new SerializedQueueFull(key, this.maxPending));
    if (code === SERIALIZER_BAD_TIMEOUT) throw timeoutError('options.timeoutMs', timeoutMs);
    if (code === SERIALIZER_KEY_EMPTY || code === SERIALIZER_KEY_TOO_LONG) throw keyError('key', key, code === SERIALIZER_KEY_EMPTY);
    if (code === SERIALIZER_IDLE_LINE) throw new Error('keyturn: the line of a busy key went idle unseen'); // a bug
    throw rangeError(MESSAGES.tooManyWorks, {});
  }

  /** A started job whose controller could be made goes to its turns: the work, or its lease first. */
  begin(job) {
    job.state = RUNNING;
    try {
      job.controller = new AbortController();
    } catch (error) {
      job.reject(error);
      return;
    }
    this.turns.start(job);
  }

  /** A job whose deadline cannot be armed does not run; its caller gets the host's error. */
  unarmed(job, error) {
    job.state = RUNNING;
    job.reject(error);
  }

  /**
   * A line's change (bits from the core). Gone idle: the line goes, its lease is let go, and
   * with nothing queued anywhere the scheduler's timer too. Answers whether it went idle.
   */
  lineChanged(line, change) {
    if ((change & SERIALIZER_IDLE) === 0) return false;
    this.turns.idle(line);
    if (this.lines.get(line.key) === line) this.lines.delete(line.key);
    if (this.lines.size === 0) this.scheduler.idle();
    return true;
  }

  /** Tells an abandoned running job and its caller: as the reference, abort first, then reject. */
  timeOut(job, hostError) {
    try {
      job.controller?.abort(hostError);
    } catch {
      // listeners' errors are the host's to report
    }
    job.reject(hostError ?? new SerializedWorkTimeout(job.line.key, job.timeoutMs));
  }

  /** Abandons a running job whose deadline passed (its own timer's, or its lease wait's). */
  timeOutNow(job) {
    try {
      if (!this.core.abandon(job.line.id, false)) return;
    } catch (error) {
      this.failed(error);
      return;
    }
    this.timeOut(job, undefined);
  }

  /**
   * The job's caller gave up (its signal, with `reason`; for a coalescing job, its last
   * caller): a waiting job leaves its line, a running one is abandoned.
   */
  abort(job, reason) {
    if (job.state === QUEUED) {
      let change;
      try {
        change = this.core.cancel(job.ticket);
      } catch (error) {
        this.failed(error);
        return;
      }
      if (change & SERIALIZER_NOT_WAITING) return;
      job.state = CANCELLED;
      job.signal?.removeEventListener('abort', job);
      job.reject(reason);
      this.scheduler.cancelled(job, change);
    } else if (job.state === RUNNING) {
      try {
        this.core.abandon(job.line.id, true);
      } catch (error) {
        this.failed(error);
        return;
      }
      try {
        job.controller?.abort(reason);
      } catch {
        // listeners' errors are the host's to report
      }
      job.reject(reason);
    }
  }

  /**
   * A coalescing job's caller's signal aborted: that caller alone rejects with its reason.
   * The job goes on for the callers left, and leaves its line (or is abandoned) with its last.
   */
  leave(caller) {
    const job = caller.job;
    const reason = caller.signal.reason;
    caller.signal.removeEventListener('abort', caller);
    caller.left = true;
    caller.leftWith = reason;
    if (job.state === QUEUED || job.state === RUNNING) {
      let others;
      try {
        others = this.core.leave(job.ticket);
      } catch (error) {
        this.failed(error);
        return;
      }
      if (!others) this.abort(job, reason);
      // Out of the work, but its promise waits for the work's end (see the scheduler's rule).
      else if (!this.scheduler.leavesAtOnce(caller)) return;
    }
    Callers.done(caller);
    caller.reject(reason);
  }

  /** An abandoned work settled after all. */
  lateSettled() {
    try {
      this.core.lateSettled();
    } catch (error) {
      this.failed(error);
    }
  }

  pending(key, all) {
    if (this.instance.failure !== undefined) throw this.instance.failure;
    try {
      if (all) return this.core.keys();
      const line = this.lines.get(key);
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
    const stats = {};
    for (let i = 0; i < STATS.length; i++) stats[STATS[i]] = values[i];
    return stats;
  }
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
 */
export function serializerApi(Scheduler, locks) {
  return function createKeyedSerializer(options) {
    const serializer = new Serializer(options, Scheduler, locks);
    const serialize = (key, work, callOptions) => serializer.serialize(key, work, callOptions);
    serialize.pending = function pending(key) {
      return serializer.pending(key, arguments.length === 0);
    };
    serialize.stats = () => serializer.stats();
    return serialize;
  };
}
