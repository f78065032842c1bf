// createKeyedSerializer over the serializer's wasm module (keyturn_wasm). Static JS, copied into
// pkg/ by the build; the entries initialise the module before anything here runs.
//
// The core (Rust, `SerializerBinding`) holds each busy key's line of jobs, their deadlines and
// the counters, and decides; this file makes every host call — promises, AbortControllers,
// timers, the works themselves — on what it answers. The core never calls into JavaScript, so
// a host call that throws (a timer refused past a platform's quota, an AbortController that
// cannot be made) is an ordinary error here, with no Rust state half changed.
//
// Microtask order is the seed's: the handlers a caller attached to a work's promise run before
// the next work of its key starts. A work is called two microtasks after its turn comes (the
// previous work's promise settled, or an idle key was called), as the seed's `previous.then(() =>
// bounded(…))` and `Promise.resolve().then(work)` do.
//
// With a `store`, a started job first takes its key's lease through the lock's manager for that
// store (lock.js; the lock named SERIALIZE_PREFIX + key), then runs with the lease's fence; the
// lease is renewed while the work runs and handed to the key's next job without a store call.
import * as glue from './keyturn_wasm.js';
import { InstanceHost } from './instance.js';
import { SerializedWorkTimeout, SerializedQueueFull } from './errors.js';
import { DEFAULT_TIMEOUT_MS, SERIALIZE_PREFIX } from './constants.js';
import { acquireWith, storeManager, HAND_ON } from './lock.js';

export { DEFAULT_TIMEOUT_MS, SERIALIZE_PREFIX, SerializedWorkTimeout, SerializedQueueFull };

const { SerializerBinding: Binding } = glue;

// Cloudflare Workers run each request in its own I/O context: a work started from another
// request's context has its I/O cancelled when that request ends, and so are its timers. The
// workerd entry turns this on; then every work starts from a promise reaction its own caller
// registered and has a deadline timer of its own, armed in its own context and cleared when it
// settles.
let contextual = false;

/** Called once by the workerd entry. */
export function startWorksInTheirCallersContext() {
  contextual = true;
}

let host;
/** The serializer module's live instance (a fresh one after a failure, where possible). */
function liveInstance() {
  host ??= new InstanceHost(glue);
  return host.current();
}

// What the core answers. Refusals of `enqueueOn` (negative), and line changes (bits).
const QUEUE_FULL = -1;
const BAD_TIMEOUT = -2;
const TOO_MANY = -3;
const IDLE_LINE = -4;
const IDLE = 1;
const NEXT = 2;
const NOT_WAITING = 4;

// A job's life, as this file sees it.
const QUEUED = 0;
const RUNNING = 1; // its turn came: controller made, deadline armed
const DONE = 2; // its caller's promise settled
const CANCELLED = 3; // its caller's signal aborted while it waited: out of the line

/** What a work gets as its second argument; without a store there is no lease to fence. */
const NO_STORE_TURN = Object.freeze({ fence: 0 });

const resolved = Promise.resolve();
const ignore = () => {};

/**
 * Queues `task` as a microtask, as a reaction to a settled promise: the same place in the queue
 * as `queueMicrotask`, but it cannot throw, and on Node it costs no AsyncResource per call.
 */
function microtask(task) {
  resolved.then(task);
}

/**
 * A rejected promise for a refused call. Handled here, as every result is in the seed (its tail
 * handles each one): a rejection nobody awaits is never an unhandled rejection; callers that
 * await it still see it.
 */
function refused(error) {
  const result = Promise.reject(error);
  result.then(undefined, ignore);
  return result;
}

const unref = (timer) => {
  // Node answers a Timeout object: a pending deadline must not keep a process alive (as the
  // seed's unref'd timer does not). Browsers and Workers answer a number.
  if (typeof timer === 'object' && timer !== null && typeof timer.unref === 'function') timer.unref();
};

const clear = (timer) => {
  try {
    clearTimeout(timer);
  } catch {
    // a timer that cannot be cleared fires into a job that has settled, which ignores it
  }
};

/**
 * One call: its work, its caller's resolvers, and how far it got. A call without options keeps
 * only these six fields: a queued job lives until its turn, so each field is memory the young
 * generation copies for every call waiting (five fields fewer: 4–7 % more works/s on one busy
 * key, Node 20).
 */
class Job {
  constructor(line, work) {
    this.line = line;
    this.work = work;
    this.state = QUEUED;
    this.resolve = undefined;
    this.reject = undefined;
    this.controller = undefined;
  }

  /** Its deadline, in ms: the serializer's. */
  get timeoutMs() {
    return this.line.serializer.timeoutMs;
  }

  /** The caller's signal aborted (an EventListener object: no closure per job). */
  handleEvent() {
    this.line.serializer.abortJob(this);
  }
}
// A call without options has none of these: its prototype answers for it.
Job.prototype.signal = undefined;
Job.prototype.onLateSettle = undefined;
Job.prototype.ticket = -1;

/** A call with options. */
class OptionJob extends Job {
  constructor(line, work, signal, onLateSettle, timeoutMs) {
    super(line, work);
    this.signal = signal; // the caller's
    this.onLateSettle = onLateSettle;
    this.ownTimeoutMs = timeoutMs; // its own deadline, in ms, or NaN for the serializer's
    this.ticket = -1; // for a job that may leave its line early, or in contextual mode
  }

  get timeoutMs() {
    return Number.isNaN(this.ownTimeoutMs) ? this.line.serializer.timeoutMs : this.ownTimeoutMs;
  }
}

/** A job in contextual mode (Workers), which starts from its own reactions. */
class ContextJob extends OptionJob {
  constructor(line, work, signal, onLateSettle, timeoutMs) {
    super(line, work, signal, onLateSettle, timeoutMs);
    this.timer = undefined; // its own deadline timer
    this.prev = undefined; // the job queued right before it
    this.tail = undefined; // settles a reaction after its caller's promise
    this.step = undefined; // its reaction once its turn may have come
    this.due = false; // its turn came; it starts a microtask later
  }
}

// `new Promise` runs its executor at once: this hands it the job being made, without a closure.
let entering;
function executor(resolve, reject) {
  entering.resolve = resolve;
  entering.reject = reject;
}

/** A busy key's line: its id in the core, and (contextual mode) its last job. */
class Line {
  constructor(serializer, key, id) {
    this.serializer = serializer;
    this.key = key;
    this.id = id;
    this.last = undefined;
    this.advance = contextual ? undefined : () => serializer.advance(this);
    // With a store: the job whose turn it is, and the lease it handed on, which the next
    // job's acquisition takes over (or a release frees, if the key goes idle first).
    this.current = undefined;
    this.held = undefined;
  }
}

/** A lease lost while its work ran: the reason its signal aborts with. */
function lostLease(key) {
  return new DOMException(`keyturn: the lease of key ${key} was lost (the store refused a renewal)`, 'AbortError');
}

/** Whatever the call answers instead of a job: refused before anything was queued. */
class Refusal {
  constructor(error) {
    this.error = error;
  }
}

class Serializer {
  constructor(options) {
    this.instance = liveInstance();
    this.core = new Binding(options, !contextual); // throws the TypeError/RangeError naming an option
    this.timeoutMs = this.core.timeoutMs();
    this.maxPending = this.core.maxPending();
    // With a store: the lock manager of that store, and the lease each running turn holds.
    this.staleMs = this.core.staleMs();
    this.locks = options?.store === undefined ? undefined : storeManager(options.store); // a TypeError for a store that is not one
    this.lines = new Map();
    this.admitted = undefined;
    // Direct mode: one timer for the earliest deadline, and the lines whose head's turn came,
    // started two microtasks later (see the top of this file).
    this.timer = undefined;
    this.armedAt = Infinity;
    this.onTimer = () => this.expire();
    this.ready = [];
    this.staged = [];
    this.readyQueued = false;
    this.stage = () => this.stageReady();
    this.startStaged = () => this.startAll();
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

  /** Checks a call and queues its job: the job, or a Refusal. Throws for bad arguments. */
  enter(key, work, options) {
    if (typeof work !== 'function') throw Binding.workError(work);
    let signal;
    let onLateSettle;
    let timeoutMs = NaN;
    if (options !== undefined) {
      if (options === null || typeof options !== 'object') throw Binding.optionsError(options);
      signal = options.signal;
      onLateSettle = options.onLateSettle;
      const ownTimeout = options.timeoutMs;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw Binding.signalError(signal);
      if (onLateSettle !== undefined && typeof onLateSettle !== 'function') throw Binding.onLateSettleError(onLateSettle);
      if (ownTimeout !== undefined) {
        if (typeof ownTimeout !== 'number' || Number.isNaN(ownTimeout)) throw Binding.timeoutError(ownTimeout);
        timeoutMs = ownTimeout;
      }
      if (signal !== undefined && signal.aborted) {
        if (!this.lines.has(key)) Binding.checkKey(key);
        return new Refusal(signal.reason);
      }
    }
    let line = this.lines.get(key);
    const job = contextual
      ? new ContextJob(line, work, signal, onLateSettle, timeoutMs)
      : options === undefined
        ? new Job(line, work)
        : new OptionJob(line, work, signal, onLateSettle, timeoutMs);
    if (line !== undefined) {
      const ticket = this.core.enqueueOn(line.id, job, timeoutMs);
      if (ticket < 0) {
        if (ticket === QUEUE_FULL) return new Refusal(new SerializedQueueFull(key, this.maxPending));
        if (ticket === BAD_TIMEOUT) throw Binding.timeoutError(timeoutMs);
        if (ticket === TOO_MANY) throw Binding.tooManyWorks();
        if (ticket === IDLE_LINE) throw new Error('keyturn: the line of a busy key went idle unseen'); // a bug
      }
      job.ticket = ticket;
    } else {
      line = new Line(this, key, this.core.open(key, job, timeoutMs)); // throws for a bad key or timeout
      this.lines.set(key, line);
      job.line = line;
      if (signal !== undefined || contextual) job.ticket = this.core.headTicket(line.id);
      if (!contextual) this.schedule(line);
    }
    return job;
  }

  /**
   * Checks and queues a call: answers its caller's promise, and leaves its job in `admitted`
   * (undefined when the call was refused) for the caller to read at once — not returned in an
   * object, which would be an allocation per call.
   */
  admit(key, work, options) {
    this.admitted = undefined;
    if (this.instance.failure !== undefined) return refused(this.instance.failure);
    let job;
    try {
      job = this.enter(key, work, options);
    } catch (error) {
      return refused(this.failed(error));
    }
    if (job instanceof Refusal) return refused(job.error);
    entering = job;
    const result = new Promise(executor);
    entering = undefined;
    this.admitted = job;
    return result;
  }

  /** `serialize(key, work, options)`, in direct mode. */
  serialize(key, work, options) {
    const result = this.admit(key, work, options);
    const job = this.admitted;
    if (job === undefined) return result;
    this.admitted = undefined;
    if (job.signal === undefined) {
      // The key moves on once this promise settles, whatever the work did. This reaction also
      // makes a rejection nobody awaits not an unhandled rejection, as in the seed, whose own
      // tail handles every result; callers that await it still see it.
      result.then(job.line.advance, job.line.advance);
    } else {
      const done = () => this.jobDone(job);
      result.then(done, done);
      job.signal.addEventListener('abort', job);
    }
    return result;
  }

  /** `serialize(key, work, options)`, in contextual mode (Workers). */
  serializeInContext(key, work, options) {
    const result = this.admit(key, work, options);
    const job = this.admitted;
    if (job === undefined) return result;
    this.admitted = undefined;
    const line = job.line;
    job.prev = line.last;
    line.last = job;
    // Its own reaction: settles `tail` one microtask after `result`, as the seed's tail does,
    // so the next job — which starts from a reaction on this tail, in its own caller's
    // context — starts after this caller's handlers ran.
    const done = () => this.jobDoneInContext(job);
    job.tail = result.then(done, done);
    job.step = () => this.stepInContext(job);
    if (job.prev === undefined) microtask(job.step);
    else job.prev.tail.then(job.step);
    if (job.signal !== undefined) job.signal.addEventListener('abort', job);
    return result;
  }

  // ---- direct mode: starting ----

  /** A line's head waits to be started: two microtasks from now. */
  schedule(line) {
    this.ready.push(line);
    if (!this.readyQueued) {
      this.readyQueued = true;
      microtask(this.stage);
    }
  }

  stageReady() {
    this.readyQueued = false;
    const ready = this.ready;
    if (this.staged.length === 0) {
      this.ready = this.staged;
      this.staged = ready;
    } else {
      for (let i = 0; i < ready.length; i++) this.staged.push(ready[i]);
      ready.length = 0;
    }
    microtask(this.startStaged);
  }

  startAll() {
    const staged = this.staged;
    if (staged.length === 0) return;
    const now = performance.now();
    for (let i = 0; i < staged.length; i++) {
      let job;
      try {
        job = this.core.startHead(staged[i].id, now);
      } catch (error) {
        this.failed(error);
        break;
      }
      if (job !== undefined) this.run(job, now);
    }
    staged.length = 0;
  }

  /** Direct mode: a started job's deadline, on the shared timer, then its work. */
  run(job, now) {
    job.line.current = job;
    const deadline = now + job.timeoutMs;
    if (deadline < this.armedAt) {
      try {
        this.arm(deadline, now);
      } catch (error) {
        this.unarmed(job, error);
        return;
      }
    }
    if (this.begin(job)) this.proceed(job);
  }

  /** A started job: its work now, or — with a store — once it holds its key's lease. */
  proceed(job) {
    if (this.locks === undefined) this.call(job, NO_STORE_TURN);
    else this.lease(job);
  }

  /** A work whose deadline cannot be armed does not run; its caller gets the host's error. */
  unarmed(job, error) {
    job.state = RUNNING;
    job.reject(error);
  }

  /** Makes the job's controller: false (and its caller told) if the host refused one. */
  begin(job) {
    job.state = RUNNING;
    try {
      job.controller = new AbortController();
      return true;
    } catch (error) {
      job.reject(error);
      return false;
    }
  }

  /** Calls the work with its signal, and settles the caller's promise as the work does. */
  call(job, turn) {
    const work = job.work;
    job.work = undefined;
    try {
      const value = work(job.controller.signal, turn);
      if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
        // Not a thenable: settled already, and nothing is left to abort.
        job.resolve(value);
        return;
      }
      // Not `resolve(value)`: that would lock the caller's promise to the work, and a timeout
      // or the caller's signal must still be able to reject it. The job's own resolvers: no
      // closure per work (its controller is let go when its line moves on, see `advance`).
      const run = Promise.resolve(value);
      run.then(job.resolve, job.reject);
      if (job.onLateSettle !== undefined) this.watchLate(job, run);
    } catch (error) {
      job.reject(error);
    }
  }

  /** Reports a late settlement of an abandoned work to `onLateSettle` (what it throws is dropped). */
  watchLate(job, run) {
    const { signal } = job.controller;
    const late = (value) => {
      if (!signal.aborted) return;
      try {
        this.core.lateSettled();
      } catch (error) {
        this.failed(error);
      }
      try {
        job.onLateSettle(value);
      } catch {
        // a re-decision that cannot even be queued changes nothing; the next call decides
      }
    };
    run.then(late, () => late(undefined));
  }

  // ---- direct mode: moving on ----

  /** A plain job's promise settled: it was its line's head, which moves on. */
  advance(line) {
    // Let go of the controller as soon as the work settled: a job queued a while ago is in the
    // old generation, and its pointer to the young controller would keep the signal alive
    // through every scavenge until the job itself is collected (a quarter of the per-work
    // cost, measured on Node 20).
    const head = line.current;
    if (head !== undefined && this.locks === undefined) {
      head.controller = undefined;
      line.current = undefined;
    }
    let change;
    try {
      change = this.core.finishHead(line.id);
    } catch (error) {
      this.failed(error);
      return;
    }
    if (this.locks !== undefined) this.turnEnded(line);
    this.lineChanged(line, change);
  }

  lineChanged(line, change) {
    if (change & IDLE) {
      if (line.held !== undefined) this.letGo(line);
      if (this.lines.get(line.key) === line) this.lines.delete(line.key);
      // Nothing queued or running: no timer stays behind (a busy serializer keeps its one).
      if (this.lines.size === 0 && this.timer !== undefined) {
        clear(this.timer);
        this.timer = undefined;
        this.armedAt = Infinity;
      }
    } else if (change & NEXT && !contextual) {
      this.schedule(line);
    }
  }

  /** A job with a signal settled: its listener goes, and its line moves on unless it left. */
  jobDone(job) {
    job.signal.removeEventListener('abort', job);
    if (job.state === CANCELLED) return;
    job.state = DONE;
    this.advance(job.line);
  }

  // ---- deadlines: the shared timer ----

  /** Arms the shared timer for `deadline` (a new timer first, so a refusal leaves the old one). */
  arm(deadline, now) {
    const timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(deadline - now)));
    unref(timer);
    const old = this.timer;
    this.timer = timer;
    this.armedAt = deadline;
    if (old !== undefined) clear(old);
  }

  expire() {
    this.timer = undefined;
    this.armedAt = Infinity;
    const now = performance.now();
    try {
      let job;
      while ((job = this.core.expireNext(now)) !== undefined) this.timeOut(job, undefined);
      for (;;) {
        const next = this.core.nextDeadline();
        if (next === Infinity) return;
        try {
          this.arm(next, now);
          return;
        } catch (error) {
          // No timer can bound the earliest work: it is given up on with the host's error.
          const earliest = this.core.abandonEarliest();
          if (earliest === undefined) return;
          this.timeOut(earliest, error);
        }
      }
    } catch (error) {
      this.failed(error);
    }
  }

  /** Tells an abandoned running job and its caller: as the seed, abort first, then reject. */
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

  // ---- the caller's signal ----

  abortJob(job) {
    const reason = job.signal.reason;
    if (job.state === QUEUED) {
      let change;
      try {
        change = this.core.cancel(job.ticket);
      } catch (error) {
        this.failed(error);
        return;
      }
      if (change & NOT_WAITING) return;
      job.state = CANCELLED;
      job.signal.removeEventListener('abort', job);
      job.reject(reason);
      this.lineChanged(job.line, change);
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

  // ---- contextual mode ----

  /**
   * A job's reaction, in its caller's context: when its turn has come, it starts a microtask
   * later — deadline timer, controller, work — as the seed's `bounded` then `Promise.resolve()
   * .then(work)` do. Until then it still waits (and a caller's abort takes it out of the line).
   */
  stepInContext(job) {
    if (job.state !== QUEUED) return;
    if (!job.due) {
      // The job it waited for settled: it was the head, so this one is now — unless that one
      // left the line early (its caller's signal), when the core says who is ahead now.
      if (job.prev !== undefined && job.prev.state === CANCELLED) {
        try {
          if (!this.core.isHead(job.ticket)) {
            const ahead = this.core.jobAhead(job.ticket);
            if (ahead !== undefined) {
              job.prev = ahead;
              ahead.tail.then(job.step);
            }
            return;
          }
        } catch (error) {
          this.failed(error);
          return;
        }
      }
      job.due = true;
      microtask(job.step);
      return;
    }
    let started;
    try {
      // No time: with a timer per work the core orders no deadlines (and workerd's
      // performance.now() costs as much as a fifth of a timer).
      started = this.core.startHead(job.line.id, 0);
    } catch (error) {
      this.failed(error);
      return;
    }
    if (started !== job) return;
    try {
      // A closure rather than `setTimeout(f, ms, job)`: workerd takes nearly twice as long to
      // arm and clear a timer given an argument to pass.
      job.timer = setTimeout(() => this.expireOwn(job), Math.max(1, Math.ceil(job.timeoutMs)));
      unref(job.timer);
    } catch (error) {
      this.unarmed(job, error);
      return;
    }
    if (this.begin(job)) this.proceed(job);
  }

  expireOwn(job) {
    job.timer = undefined;
    if (job.state === RUNNING) this.timeOutNow(job);
  }

  jobDoneInContext(job) {
    if (this.locks === undefined) job.controller = undefined; // as in `advance`
    if (job.timer !== undefined) {
      clear(job.timer);
      job.timer = undefined;
    }
    if (job.signal !== undefined) job.signal.removeEventListener('abort', job);
    if (job.state === CANCELLED) return;
    job.state = DONE;
    let change;
    try {
      change = this.core.finishTicket(job.ticket);
    } catch (error) {
      this.failed(error);
      return;
    }
    if (this.locks !== undefined) {
      this.turnEnded(job.line);
      if (change & IDLE) this.letGo(job.line);
    }
    // The next job starts from its own reaction on this job's tail.
    if (change & IDLE && this.lines.get(job.line.key) === job.line) this.lines.delete(job.line.key);
  }

  // ---- with a store: the key's lease ----

  /**
   * Takes the key's lease for a started job, then calls its work with the lease's fence. The
   * wait is bounded by the job's deadline (its controller aborts the acquisition at timeout or
   * the caller's abort, leaving nothing held). The lease the job before handed on is released
   * only once this acquisition is in line, so the core hands it over without a store call; the
   * works queued behind are announced, so one record write reserves fences for all of them.
   */
  lease(job) {
    const line = job.line;
    line.current = job;
    let followers = 0;
    try {
      followers = Math.max(0, this.core.pendingIn(line.id) - 1);
    } catch (error) {
      this.failed(error);
    }
    const signal = job.controller.signal;
    acquireWith(this.locks, SERIALIZE_PREFIX + line.key, job.timeoutMs, this.staleMs, signal, true).then(
      (lock) => this.leased(job, lock),
      (error) => {
        // Aborted: the deadline or the caller's signal told the caller already.
        if (!signal.aborted) job.reject(error);
      },
    );
    const held = line.held;
    if (held !== undefined) {
      line.held = undefined;
      held[HAND_ON](followers).catch(ignore);
    }
  }

  leased(job, lock) {
    if (lock === undefined) {
      // The wait ended on the lock's clock before the deadline's timer fired: the same end.
      if (job.line.current === job) this.timeOutNow(job);
      return;
    }
    if (job.controller.signal.aborted || job.line.current !== job) {
      lock[HAND_ON](0).catch(ignore);
      return;
    }
    job.lock = lock;
    this.renewLater(job);
    this.callLeased(job, { fence: lock.fence });
  }

  /**
   * `call`, with a lease: when the work settles and nothing of its key is queued behind it, the
   * lease is freed before its caller hears — so a handler that answers its request as soon as
   * its work settled leaves nothing held (on Workers, I/O still in flight when a request ends
   * may be cancelled). With works behind, the next one takes the lease over with no store call.
   */
  callLeased(job, turn) {
    const work = job.work;
    job.work = undefined;
    let run;
    try {
      run = Promise.resolve(work(job.controller.signal, turn));
    } catch (error) {
      run = Promise.reject(error);
    }
    run.then(
      (value) => this.settleLeased(job, () => job.resolve(value)),
      (error) => this.settleLeased(job, () => job.reject(error)),
    );
    if (job.onLateSettle !== undefined) this.watchLate(job, run);
  }

  settleLeased(job, settle) {
    const lock = job.lock;
    let last = false;
    try {
      last = lock !== undefined && job.line.current === job && !job.controller.signal.aborted && this.core.pendingIn(job.line.id) <= 1;
    } catch (error) {
      this.failed(error);
    }
    if (!last) {
      settle();
      return;
    }
    job.lock = undefined;
    if (job.renewal !== undefined) {
      clear(job.renewal);
      job.renewal = undefined;
    }
    lock[HAND_ON](0).then(settle, settle);
  }

  /** Renews a running job's lease every staleMs / 3; a refused renewal aborts its signal. */
  renewLater(job) {
    try {
      job.renewal = setTimeout(() => {
        job.renewal = undefined;
        const lock = job.lock;
        if (lock === undefined) return;
        lock.renew().then(
          (held) => {
            if (job.lock !== lock) return;
            if (held) this.renewLater(job);
            else job.controller?.abort(lostLease(job.line.key));
          },
          () => job.lock === lock && this.renewLater(job),
        );
      }, this.staleMs / 3);
      unref(job.renewal);
    } catch {
      // no timer for renewals: the lease runs staleMs, as an unrenewed lock's does
    }
  }

  /** A line's turn ended (its job's promise settled): its lease waits for the next job. */
  turnEnded(line) {
    const job = line.current;
    if (job === undefined) return;
    line.current = undefined;
    if (job.renewal !== undefined) {
      clear(job.renewal);
      job.renewal = undefined;
    }
    const lock = job.lock;
    if (lock === undefined) return;
    job.lock = undefined;
    if (line.held !== undefined) line.held[HAND_ON](0).catch(ignore);
    line.held = lock;
  }

  /** An idle key's lease is freed for the other isolates. */
  letGo(line) {
    const held = line.held;
    if (held === undefined) return;
    line.held = undefined;
    held[HAND_ON](0).catch(ignore);
  }

  // ---- looking ----

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
    try {
      return this.core.stats();
    } catch (error) {
      throw this.failed(error);
    }
  }
}

/**
 * createKeyedSerializer({ timeoutMs, maxPending }) → serialize(key, work, { signal, timeoutMs, onLateSettle })
 *
 * `serialize(key, work)` runs `work(signal, turn)` once every work previously queued for `key`
 * has settled, and resolves or rejects as `work` does — or rejects with a
 * `SerializedWorkTimeout` (and aborts `signal`) when `work` has not settled within its deadline;
 * `onLateSettle(value)` is then called if and when that abandoned work settles.
 * `serialize.pending()` is the number of keys with queued or running work, `pending(key)` the
 * works of one key, `stats()` the counters.
 */
export function createKeyedSerializer(options) {
  const serializer = new Serializer(options);
  const serialize = contextual
    ? (key, work, callOptions) => serializer.serializeInContext(key, work, callOptions)
    : (key, work, callOptions) => serializer.serialize(key, work, callOptions);
  serialize.pending = function pending(key) {
    return serializer.pending(key, arguments.length === 0);
  };
  serialize.stats = () => serializer.stats();
  return serialize;
}
