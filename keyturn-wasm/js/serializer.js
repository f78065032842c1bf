// createKeyedSerializer (index.d.ts) over an engine: the serializer's module's (no store), or
// the lock module's of the store (a serializer with a `store`). Static JS, copied into pkg/ by
// the build.
//
// The engine decides when each work starts, ends, times out and — over a store — holds its
// key's lease; this file makes the host calls it says. What only the JS can know is when: a
// work starts two microtasks after the engine says it may (`READY`) — the place
// `keyed-serializer.js` (keyturn is its drop-in) gives it, so that the handlers a caller
// attached to the work before run first — and its line moves on once its caller heard (`DONE`,
// a reaction on the caller's promise). On Workers (`inContext`) what the engine says of a job
// is done from the job's own request (docs/design.md, "Cloudflare Workers").
import { SerializedWorkTimeout, SerializedQueueFull, SerializedWorkUnavailable, ConcurrencyMismatch, abortError } from './errors.js';
import {
  DEFAULT_TIMEOUT_MS,
  EFFECT_ABORT,
  EFFECT_ARM,
  EFFECT_READY,
  EFFECT_SETTLE,
  EFFECT_START,
  EVENT_CANCEL,
  EVENT_DONE,
  EVENT_DONE_HEAD,
  EVENT_CALLED,
  EVENT_FIRED_WORK,
  EVENT_LATE_SETTLED,
  EVENT_LEAVE,
  EVENT_SETTLED,
  EVENT_START,
  EVENT_START_WORK,
  FIELD_CODE,
  FIELD_FENCE,
  FIELD_FOUND,
  FIELD_ID,
  FIELD_JOINED,
  FIELD_LEFT,
  FIELD_LINE,
  FIELD_MS,
  FIELD_REPORT,
  FIELD_SLOT,
  MESSAGES,
  OUTCOME_ABORTED,
  OUTCOME_DONE,
  OUTCOME_MISMATCH,
  OUTCOME_NEVER_STARTED,
  OUTCOME_NOT_YET,
  OUTCOME_TIMED_OUT,
  OUTCOME_TIMER_REFUSED,
  QUERY_AHEAD,
  QUERY_CHECK_CALL,
  QUERY_KEYS,
  QUERY_MAX_PENDING,
  QUERY_ONE_ISOLATE,
  QUERY_PENDING,
  QUERY_STAT,
  REFUSED_QUEUE_FULL,
  REFUSED_SCOPE_OVER_STORE,
  REFUSED_UNAVAILABLE,
  SERIALIZE_PREFIX,
  STATS,
  WHY_ABORTED,
  WHY_TIMED_OUT,
  WHY_TIMER_REFUSED,
} from './constants.js';
import { OptionNames, checkKey, coalesceGroup, optionalBoolean, optionalFunction, optionalNumber, optionalSignal, rateOption, refusalError, scopeOption, typeError, wrongType } from './arguments.js';
import { Callers, ignore } from './coalescing.js';
import { Door } from './engine.js';
import { clear } from './timers.js';
import { TurnTrace, channels, traceOf } from './tracing.js';

/** @typedef {import('./engine.js').Host} Host */
/** @typedef {{ readonly fence: number, readonly slot: number }} Turn */
/** @typedef {(signal: AbortSignal, turn: Turn) => unknown} Work */

const SERIALIZER_NAMES = ['timeoutMs', 'maxPending', 'concurrency', 'rate', 'store', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs', 'scope'];
// Other libraries' words for these options. Without a store a work's only time is its deadline;
// with one, a "ttl" or "lease" is the lease its turn holds. Waiting for the lease is within the
// deadline: a serializer has no waitMs.
const SERIALIZER_MEANT = {
  timeout: 'timeoutMs', deadline: 'timeoutMs', wait: 'timeoutMs', ttl: 'timeoutMs', lease: 'timeoutMs', expiry: 'timeoutMs',
  max: 'maxPending', maxqueue: 'maxPending', queuesize: 'maxPending', maxsize: 'maxPending', capacity: 'maxPending',
  concurrent: 'concurrency', parallel: 'concurrency', parallelism: 'concurrency', slots: 'concurrency', permits: 'concurrency',
  ratelimit: 'rate', pace: 'rate', throttle: 'rate', interval: 'rate',
  storage: 'store', backend: 'store', skew: 'maxClockSkewMs', clockskew: 'maxClockSkewMs',
};
const SERIALIZER_LISTED = ' A serializer takes timeoutMs, maxPending, concurrency, rate, store and scope; with a store also three of the lock\'s options: staleMs, maxClockSkewMs and storeTimeoutMs (its wait for a key\'s lease is within timeoutMs).';
const SERIALIZER_OPTIONS = new OptionNames(SERIALIZER_NAMES, SERIALIZER_MEANT, SERIALIZER_LISTED);
const STORE_SERIALIZER_OPTIONS = new OptionNames(SERIALIZER_NAMES, { ...SERIALIZER_MEANT, ttl: 'staleMs', lease: 'staleMs', expiry: 'staleMs' }, SERIALIZER_LISTED);
const CALL_OPTIONS = new OptionNames(['signal', 'onLateSettle', 'timeoutMs', 'coalesce', 'ifAvailable'], {
  timeout: 'timeoutMs', deadline: 'timeoutMs', ttl: 'timeoutMs', abortsignal: 'signal', nowait: 'ifAvailable', trylock: 'ifAvailable', immediate: 'ifAvailable', dedupe: 'coalesce',
});

const resolved = Promise.resolve();

/**
 * Queues `task` as a reaction to a settled promise: the place `queueMicrotask` would give it,
 * but this cannot throw, and on Node it costs no AsyncResource per call.
 * @param {() => void} task
 */
const microtask = (task) => {
  resolved.then(task);
};

/** @type {Job | undefined} the job whose caller's promise is being made (`capture` is its executor: no closure per job) */
let capturing;

/**
 * @param {(value: unknown) => void} resolve
 * @param {(error: unknown) => void} reject
 */
function capture(resolve, reject) {
  const job = /** @type {Job} */ (capturing);
  job.resolve = resolve;
  job.reject = reject;
}

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
 * A `retryAfterMs` as the engine gives it: negative when it has none to give.
 * @param {number} ms
 */
function orNone(ms) {
  return ms < 0 ? undefined : ms;
}

/**
 * The trace of `job`'s turn: the one made when it was queued, or one made now (queued before
 * anyone subscribed).
 * @param {Job} job
 */
function traced(job) {
  let trace = traceOf(job);
  if (trace === undefined) {
    trace = new TurnTrace(/** @type {import('./tracing.js').Channels} */ (channels), job.key, NaN);
    trace.wrap(job);
  }
  return trace;
}

/**
 * What a work gets as its second argument without a store: no lease to fence, and its key's
 * slot — one frozen object per slot, made when first used.
 * @type {Turn[]}
 */
const PLAIN_TURNS = [Object.freeze({ fence: 0, slot: 0 })];

/**
 * What a call passed in its options, when it passed any. A coalescing job's are its group's:
 * its callers' signals and `onLateSettle` are theirs (see `Callers`), not the job's.
 */
class CallOptions {
  /**
   * @param {AbortSignal | undefined} signal the caller's
   * @param {((value: unknown) => void) | undefined} onLateSettle
   * @param {Callers | undefined} callers a coalescing job's
   */
  constructor(signal, onLateSettle, callers) {
    this.signal = signal;
    this.onLateSettle = onLateSettle;
    this.callers = callers;
    /** @type {unknown} why its caller (a coalescing job's last) gave up */
    this.reason = undefined;
  }
}

/**
 * One call: its work, its caller's resolvers, its controller once it started, and its ticket in
 * the engine. A queued job lives until its turn, and each of its fields is memory the young
 * generation copies for every call waiting: a plain one keeps nine (what a store's or Workers'
 * job keeps besides is `TimedJob`'s).
 */
export class Job {
  /**
   * @param {Serializer} serializer
   * @param {string} key
   * @param {Work | undefined} work
   * @param {CallOptions | undefined} options
   */
  constructor(serializer, key, work, options) {
    this.serializer = serializer;
    this.key = key;
    this.work = work;
    this.options = options;
    /** @type {(value: unknown) => void} */
    this.resolve = ignore;
    /** @type {(error: unknown) => void} */
    this.reject = ignore;
    /** @type {AbortController | undefined} the work's, made when it starts */
    this.controller = undefined;
    this.ticket = -1; // its ticket in the engine
    this.handle = -1; // the number the instance holds it under
  }

  /**
   * Its instance failed: a job that never started is rejected with the failure, and never runs
   * (one that started settles with its work).
   * @param {Error} failure
   */
  failed(failure) {
    if (this.controller === undefined) this.reject(failure);
  }

  /** The caller's signal aborted (the job is its EventListener object: no closure per job). */
  handleEvent() {
    const options = /** @type {CallOptions} */ (this.options);
    options.reason = /** @type {AbortSignal} */ (options.signal).reason;
    this.serializer.event(EVENT_CANCEL, this.ticket, this.handle);
  }

  /**
   * One caller of a coalescing job left it, with `reason`: the job is given up with its last.
   * @param {unknown} reason
   */
  leave(reason) {
    /** @type {CallOptions} */ (this.options).reason = reason;
    this.serializer.event(EVENT_LEAVE, this.ticket, this.handle);
  }

  /**
   * What the engine says of this job.
   * @param {Host} host
   * @param {number} kind
   */
  effect(host, kind) {
    const serializer = this.serializer;
    if (kind === EFFECT_READY) serializer.ready(this, host.field(FIELD_LINE));
    else if (kind === EFFECT_START) serializer.begin(this, host.field(FIELD_SLOT), host.field(FIELD_FENCE), host.field(FIELD_REPORT) === 1);
    else if (kind === EFFECT_SETTLE) this.settle(host.field(FIELD_CODE), host);
    else if (kind === EFFECT_ABORT) this.abort(host.field(FIELD_CODE));
    else if (kind === EFFECT_ARM) host.arm(/** @type {TimedJob} */ (/** @type {unknown} */ (this)), () => serializer.event(EVENT_FIRED_WORK, this.ticket, this.handle), serializer.id, this.ticket);
  }

  /**
   * Its caller is told how its call ended.
   * @param {number} outcome
   * @param {Host} host
   */
  settle(outcome, host) {
    if (outcome === OUTCOME_TIMED_OUT) this.reject(new SerializedWorkTimeout(this.key, host.field(FIELD_MS)));
    else if (outcome === OUTCOME_TIMER_REFUSED) this.reject(host.refusal);
    else if (outcome === OUTCOME_ABORTED) this.reject(this.options?.reason);
    else if (outcome === OUTCOME_MISMATCH) this.reject(new ConcurrencyMismatch(SERIALIZE_PREFIX + this.key, this.serializer.concurrency, host.field(FIELD_FOUND)));
    else if (outcome === OUTCOME_NOT_YET) this.reject(new SerializedWorkUnavailable(this.key, orNone(host.field(FIELD_MS))));
    else if (outcome === OUTCOME_NEVER_STARTED) this.reject(abortError(MESSAGES.neverStarted, { key: this.key }));
    else this.reject(/** @type {TimedJob} */ (/** @type {unknown} */ (this)).failure);
  }

  /**
   * Its work's signal aborts: its deadline passed, its caller gave up, or its lease was lost.
   * @param {number} why
   */
  abort(why) {
    const reason = why === WHY_TIMED_OUT ? undefined : why === WHY_ABORTED ? this.options?.reason : why === WHY_TIMER_REFUSED ? this.serializer.host.refusal : abortError(MESSAGES.turnLeaseLost, { key: this.key });
    try {
      this.controller?.abort(reason);
    } catch {
      // listeners' errors are the host's to report
    }
  }
}

/**
 * A job over a store or on Workers: what it keeps besides a plain one's.
 */
export class TimedJob extends Job {
  /**
   * @param {Serializer} serializer
   * @param {string} key
   * @param {Work | undefined} work
   * @param {CallOptions | undefined} options
   */
  constructor(serializer, key, work, options) {
    super(serializer, key, work, options);
    /** @type {unknown} the first store failure of its turn */
    this.failure = undefined;
    /** @type {{ ok: boolean, value: unknown } | undefined} its outcome, held while its lease goes */
    this.outcome = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} on Workers: its own timer */
    this.timer = undefined;
    /** @type {Door | Door[] | undefined} on Workers: its callers' requests (the first, its own) */
    this.doors = undefined;
    /** @type {import('./engine.js').Posted | undefined} on Workers: what to do in its own request (the first; each names the next) */
    this.mail = undefined;
    /** @type {Promise<unknown> | undefined} on Workers: settles once its caller heard and the engine let it go, for the jobs behind */
    this.left = undefined;
  }

  /** On Workers: what is posted to it, and its doors. */
  get box() {
    return this;
  }

  /** On Workers: a joined caller's request may start the job too, should the first be gone. */
  follow() {
    const serializer = this.serializer;
    const door = new Door(serializer.host, this, this.handle);
    const doors = this.doors;
    this.doors = doors === undefined ? door : doors instanceof Door ? [doors, door] : [...doors, door];
    serializer.anchor(this);
  }

  /**
   * @override
   * @param {number} outcome
   * @param {Host} host
   */
  settle(outcome, host) {
    if (outcome !== OUTCOME_DONE) return super.settle(outcome, host);
    // Its work's outcome, told once its lease was let go.
    const held = this.outcome;
    this.outcome = undefined;
    if (held?.ok) this.resolve(held.value);
    else if (held !== undefined) this.reject(held.value);
  }
}

/** @typedef {import('./index.d.ts').KeyedSerializerOptions} SerializerOptions */
/** @typedef {import('./index.d.ts').SerializeOptions} CallOptionsGiven */

/**
 * What a serializer needs of its platform: an engine host without a store, or the store's.
 * @typedef {object} Hosts
 * @property {boolean} inContext
 * @property {() => Host} plain
 * @property {(store: unknown, what: string) => Host} forStore
 */

export class Serializer {
  /**
   * Throws the TypeError or RangeError naming a bad option.
   * @param {SerializerOptions | undefined} options
   * @param {Hosts} hosts
   */
  constructor(options, hosts) {
    (/** @type {{ store?: unknown } | null | undefined} */ (options)?.store === undefined ? SERIALIZER_OPTIONS : STORE_SERIALIZER_OPTIONS).check(options, 'options');
    const given = {
      timeoutMs: optionalNumber(options?.timeoutMs, 'options.timeoutMs'),
      maxPending: optionalNumber(options?.maxPending, 'options.maxPending'),
      concurrency: optionalNumber(options?.concurrency, 'options.concurrency'),
      rate: rateOption(options?.rate, 'options.rate'),
      staleMs: optionalNumber(options?.staleMs, 'options.staleMs'),
      maxClockSkewMs: optionalNumber(options?.maxClockSkewMs, 'options.maxClockSkewMs'),
      storeTimeoutMs: optionalNumber(options?.storeTimeoutMs, 'options.storeTimeoutMs'),
      isolate: scopeOption(options?.scope, 'options.scope'),
    };
    const store = options?.store;
    /** @type {Host} */
    this.host = store === undefined ? hosts.plain() : hosts.forStore(store, 'options.store');
    const { engine } = this.host;
    /** The engine's number for this serializer. */
    this.id = engine.serializer(
      given.timeoutMs,
      given.maxPending,
      given.concurrency,
      given.rate?.limit,
      given.rate?.periodMs,
      store !== undefined,
      given.staleMs,
      given.maxClockSkewMs,
      given.storeTimeoutMs,
      given.isolate,
    );
    if (this.id === REFUSED_SCOPE_OVER_STORE) throw typeError(MESSAGES.scopeOverStore, {});
    if (this.id < 0) throw refusalError(this.id, given, 'key');
    /** Whether its first call says it orders keys in this isolate only (the engine's answer). */
    this.oneIsolate = engine.query(QUERY_ONE_ISOLATE, this.id, undefined, undefined) === 1;
    this.timeoutMs = given.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.concurrency = given.concurrency ?? 1;
    this.inContext = hosts.inContext;
    /**
     * Events need the time: over a store (records carry it), on Workers (timers per call), or
     * with a pace (it counts start times).
     */
    this.timed = store !== undefined || this.inContext || given.rate !== undefined;
    /** Paced: each start is timed once its work was called (see `called`). */
    this.paced = given.rate !== undefined;
    /** ... and the wall clock: over a store (records carry it). */
    this.walled = store !== undefined;
    // Lines whose next job may start: staged a microtask later, started one after that.
    /** @type {number[]} */
    this.readyLines = [];
    /** @type {number[]} */
    this.staged = [];
    this.readyQueued = false;
    this.stage = () => this.stageReady();
    this.startStaged = () => this.startAll();
    /** @type {(() => void)[]} per line id, the reaction that moves it on (no closure per job) */
    this.advances = [];
  }

  /**
   * An event of this serializer's (`a` is its number), of a job's ticket or a line's id; on
   * Workers, as from the own request of the job held as `origin`.
   * @param {number} kind
   * @param {number} b
   * @param {number} [origin]
   */
  event(kind, b, origin) {
    const host = this.host;
    const { instance } = host;
    if (instance.failure !== undefined) return;
    try {
      const mono = this.timed ? host.mono() : NaN;
      const first = host.engine.event(kind, this.id, b, this.walled ? host.wall() : NaN, mono);
      // The line's head, whose caller heard, leaves it: the engine names its handle no more,
      // and its controller goes (see `entered`).
      if (kind === EVENT_DONE_HEAD) {
        const left = host.read(FIELD_LEFT);
        if (left >= 0) {
          /** @type {Job} */ (instance.get(left)).controller = undefined;
          instance.letGo(left);
        }
      }
      if (origin === undefined) host.apply(first);
      else host.applyAs(origin, first);
    } catch (error) {
      instance.failed(error);
    }
  }

  /**
   * `serialize(key, work, options)`: its caller's promise.
   * @param {string} key
   * @param {Work} work
   * @param {CallOptionsGiven | undefined} options
   * @returns {Promise<unknown>}
   */
  serialize(key, work, options) {
    const { instance } = this.host;
    if (instance.failure !== undefined) return refused(instance.failure);
    if (this.oneIsolate) {
      this.oneIsolate = false;
      console.warn(`keyturn: ${MESSAGES.oneIsolate}`);
    }
    try {
      return this.enter(key, work, options);
    } catch (error) {
      return refused(instance.failed(error));
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
    if (options === undefined) return this.queue(key, work, undefined, undefined, undefined, undefined, undefined);
    CALL_OPTIONS.check(options, 'options');
    const signal = optionalSignal(options.signal, 'options.signal');
    const onLateSettle = optionalFunction(options.onLateSettle, 'options.onLateSettle');
    const timeoutMs = optionalNumber(options.timeoutMs, 'options.timeoutMs');
    const group = coalesceGroup(options.coalesce, 'options.coalesce');
    const ifAvailable = optionalBoolean(options.ifAvailable, 'options.ifAvailable') === true;
    if (signal?.aborted) {
      // Refused before it queues, its bad arguments reported all the same.
      checkKey(key, 'key');
      const code = this.host.engine.query(QUERY_CHECK_CALL, this.id, timeoutMs, key);
      if (code < 0) throw refusalError(code, { key, timeoutMs }, 'key');
      return refused(signal.reason);
    }
    if (group !== undefined) {
      const callers = new Callers(group, this.inContext);
      return this.queue(key, work, new CallOptions(undefined, callers.lateSettled, callers), timeoutMs, group, signal, onLateSettle, ifAvailable);
    }
    const call = signal !== undefined || onLateSettle !== undefined ? new CallOptions(signal, onLateSettle, undefined) : undefined;
    return this.queue(key, work, call, timeoutMs, undefined, undefined, undefined, ifAvailable);
  }

  /**
   * Queues a job for the call (or joins a coalescing call to the key's last job, where the
   * engine says it may): its caller's promise, or a refusal's.
   * @param {string} key
   * @param {Work} work
   * @param {CallOptions | undefined} call
   * @param {number | undefined} timeoutMs its own deadline, or the serializer's
   * @param {string | undefined} group
   * @param {AbortSignal | undefined} signal a coalescing caller's
   * @param {((value: unknown) => void) | undefined} onLateSettle ... and its onLateSettle
   * @param {boolean} [ifAvailable] queued only if its work can start at once
   * @returns {Promise<unknown>}
   */
  queue(key, work, call, timeoutMs, group, signal, onLateSettle, ifAvailable = false) {
    const host = this.host;
    const { instance, engine } = host;
    const job = this.timed ? new TimedJob(this, key, work, call) : new Job(this, key, work, call);
    // (A lone surrogate would reach the engine as U+FFFD: refused here.)
    checkKey(key, 'key');
    job.handle = instance.hold(job);
    const kind = engine.enter(this.id, key, job.handle, timeoutMs, group, ifAvailable, this.timed ? performance.now() : NaN);
    if (kind < 0) {
      instance.letGo(job.handle);
      if (kind === REFUSED_QUEUE_FULL) return refused(new SerializedQueueFull(key, engine.query(QUERY_MAX_PENDING, this.id, undefined, undefined)));
      if (kind === REFUSED_UNAVAILABLE) {
        return refused(new SerializedWorkUnavailable(key, orNone(host.read(FIELD_MS))));
      }
      throw refusalError(kind, { key, timeoutMs }, 'key');
    }
    const joined = host.read(FIELD_JOINED);
    if (joined >= 0) {
      // Joined the key's last job: this caller is one more of its callers.
      instance.letGo(job.handle);
      const to = /** @type {Job} */ (instance.get(joined));
      host.apply(kind);
      return /** @type {Callers} */ (to.options?.callers).add(to, signal, onLateSettle);
    }
    job.ticket = host.read(FIELD_ID);
    const line = host.read(FIELD_LINE);
    capturing = job;
    const result = new Promise(capture);
    capturing = undefined;
    const callers = call?.callers;
    if (callers !== undefined) callers.settleWith(job);
    if (channels !== undefined && channels.turns()) {
      const trace = new TurnTrace(channels, key, performance.now());
      trace.wrap(job);
      trace.queued();
    }
    this.entered(job, result, line);
    if (this.inContext) host.applyAs(job.handle, kind);
    else host.apply(kind);
    return callers === undefined ? result : callers.add(job, signal, onLateSettle);
  }

  /**
   * A queued job's caller promise: once it settled, its caller heard, and the job's line moves
   * on. This reaction also makes a rejection nobody awaits not an unhandled rejection, as in
   * `keyed-serializer.js`, whose tail handles every result; callers that await it still see it.
   * On Workers, `job`'s request is this one: its door and its request's anchor (see `anchor`)
   * are made here, in one context with the reaction to its end.
   * @param {Job} job
   * @param {Promise<unknown>} result
   * @param {number} line
   */
  entered(job, result, line) {
    if (job.options === undefined && !this.inContext && this.concurrency === 1) {
      // One reaction per line, not per job: the job whose caller heard is the line's head.
      const advance = (this.advances[line] ??= () => this.event(EVENT_DONE_HEAD, line));
      result.then(advance, advance);
      return;
    }
    const done = () => this.finished(job);
    if (this.inContext) {
      const timed = /** @type {TimedJob} */ (job);
      timed.left = result.then(done, done);
      timed.doors = new Door(this.host, timed, timed.handle);
      this.anchor(timed);
    } else result.then(done, done);
    job.options?.signal?.addEventListener('abort', job);
  }

  /**
   * A paced serializer's `job` was called, and its synchronous part ran: the engine times its
   * start now, not when it decided it. Whatever ran between the two (a garbage collection,
   * even in the call of an async function, before its first line) must not open the key's
   * next window early, and anything the work sends in its synchronous part was sent by now.
   * The effects that were to follow are applied here, in their order.
   * @param {Job} job
   */
  called(job) {
    const host = this.host;
    const mono = performance.now();
    // Over a store the start travels in the record on the wall clock: it is restamped too.
    host.apply(host.engine.event(EVENT_CALLED, this.id, job.ticket, this.walled ? host.wall() : NaN, mono));
  }

  /**
   * A job's caller heard how its call ended: it leaves its line.
   * @param {Job} job
   */
  finished(job) {
    job.options?.signal?.removeEventListener('abort', job);
    // The controller goes: a job queued a while ago is in the old generation, and its pointer
    // to the young controller would keep the signal alive through every scavenge.
    job.controller = undefined;
    if (this.inContext) {
      this.event(EVENT_DONE, job.ticket, job.handle);
      // Its timer goes — a release it leaves in flight is bounded by the next timer that fires.
      const timed = /** @type {TimedJob} */ (job);
      clear(timed.timer);
      timed.timer = undefined;
    } else this.event(EVENT_DONE, job.ticket);
    // Its caller heard: the engine names it no more (one its caller gave up on while it
    // waited left its line then).
    this.host.instance.letGo(job.handle);
    job.handle = -1;
  }

  // ---- starting ----

  /**
   * The engine says `job`, line `line`'s next, may start: off Workers, two microtasks from now
   * by line; on Workers, from the job's own request.
   * @param {Job} job
   * @param {number} line
   */
  ready(job, line) {
    if (this.inContext) {
      // From its own request (see `Host.post`), two microtasks after it was ready, as the
      // seed's (mail is delivered one microtask after it was posted).
      const start = () => this.event(EVENT_START_WORK, job.ticket, job.handle);
      microtask(this.host.posted === undefined ? () => microtask(start) : start);
      return;
    }
    this.readyLines.push(line);
    if (!this.readyQueued) {
      this.readyQueued = true;
      microtask(this.stage);
    }
  }

  stageReady() {
    this.readyQueued = false;
    const ready = this.readyLines;
    if (this.staged.length === 0) {
      this.readyLines = this.staged;
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
    const host = this.host;
    const mono = performance.now();
    const wall = this.walled ? host.wall() : NaN;
    try {
      for (let i = 0; i < staged.length; i++) host.apply(host.engine.event(EVENT_START, this.id, staged[i], wall, mono));
    } catch (error) {
      host.instance.failed(error);
    }
    staged.length = 0;
  }

  /**
   * A started job: its work is called with its turn — or, over a store, its outcome is held for
   * the engine (`report`), whose `SETTLE` tells the caller once its lease is let go. A job
   * whose controller cannot be made does not run; its caller gets the host's error.
   * @param {Job} job
   * @param {number} slot
   * @param {number} fence
   * @param {boolean} report
   */
  begin(job, slot, fence, report) {
    try {
      job.controller = new AbortController();
    } catch (error) {
      job.reject(error);
      return;
    }
    const turn = fence === 0 ? (PLAIN_TURNS[slot] ??= Object.freeze({ fence: 0, slot })) : { fence, slot };
    if (channels !== undefined && channels.turns()) traced(job).started(slot, fence);
    const work = /** @type {Work} */ (job.work);
    job.work = undefined;
    let run;
    try {
      const value = work(job.controller.signal, turn);
      // Paced: the start is timed once the work's synchronous part ran (see `called`).
      if (this.paced) this.called(job);
      if (!report && (value === null || (typeof value !== 'object' && typeof value !== 'function'))) {
        // Not a thenable: settled already, and nothing is left to abort.
        job.resolve(value);
        return;
      }
      run = Promise.resolve(value);
    } catch (error) {
      if (this.paced) this.called(job);
      run = Promise.reject(error);
    }
    if (report) {
      run.then(
        (value) => this.settled(/** @type {TimedJob} */ (job), true, value),
        (error) => this.settled(/** @type {TimedJob} */ (job), false, error),
      );
    } else {
      // Not `resolve(value)`: that would lock the caller's promise to the work, and a timeout or
      // the caller's signal must still be able to reject it.
      run.then(job.resolve, job.reject);
    }
    if (job.options?.onLateSettle !== undefined) this.watchLate(job, run);
  }

  /**
   * A work that reports settled: its outcome is held until the engine tells its caller.
   * @param {TimedJob} job
   * @param {boolean} ok
   * @param {unknown} value
   */
  settled(job, ok, value) {
    job.outcome = { ok, value };
    this.event(EVENT_SETTLED, job.ticket, job.handle);
  }

  /**
   * Reports a late settlement of an abandoned work to `onLateSettle` (what it throws is dropped).
   * @param {Job} job
   * @param {Promise<unknown>} run
   */
  watchLate(job, run) {
    const { signal } = /** @type {AbortController} */ (job.controller);
    const onLateSettle = /** @type {(value: unknown) => void} */ (job.options?.onLateSettle);
    /** @param {unknown} value */
    const late = (value) => {
      if (!signal.aborted) return;
      this.event(EVENT_LATE_SETTLED, 0);
      try {
        onLateSettle(value);
      } catch {
        // a re-decision that cannot even be queued changes nothing; the next call decides
      }
    };
    run.then(late, () => late(undefined));
  }

  // ---- Workers: each job's own request ----

  /**
   * On Workers: the job right ahead of `job` while `job` waits.
   * @param {TimedJob} job
   * @returns {TimedJob | undefined}
   */
  ahead(job) {
    const { instance, engine } = this.host;
    if (job.handle < 0 || instance.failure !== undefined) return undefined;
    try {
      const ahead = engine.query(QUERY_AHEAD, this.id, job.ticket, undefined);
      return ahead < 0 ? undefined : /** @type {TimedJob} */ (instance.get(ahead));
    } catch (error) {
      instance.failed(error);
      return undefined;
    }
  }

  /**
   * On Workers: while `job` waits, its request waits on the promise of the job ahead of it —
   * another request's, as a rule: workerd cancels a request that waits on nothing but its own
   * promises — and on the next one ahead once that one left (never twice on one: a settled
   * promise would answer at once, again and again).
   * @param {TimedJob} job
   */
  anchor(job) {
    /** @type {TimedJob | undefined} */
    let last;
    const again = () => {
      last = this.anchorOn(job, last, again);
    };
    again();
  }

  /**
   * `anchor`'s step: `again` reacts to the end of the job now ahead of `job`, unless that is
   * `last`, the one it reacted to before. The job it reacts to now.
   * @param {TimedJob} job
   * @param {TimedJob | undefined} last
   * @param {() => void} again
   */
  anchorOn(job, last, again) {
    const ahead = this.ahead(job);
    if (ahead === undefined || ahead === last) return last;
    ahead.left?.then(again, again);
    return ahead;
  }

  /**
   * @param {string | undefined} key
   * @param {boolean} all
   */
  pending(key, all) {
    const { instance, engine } = this.host;
    if (instance.failure !== undefined) throw instance.failure;
    try {
      if (all) return engine.query(QUERY_KEYS, this.id, undefined, undefined);
      return typeof key === 'string' ? engine.query(QUERY_PENDING, this.id, undefined, key) : 0;
    } catch (error) {
      throw instance.failed(error);
    }
  }

  stats() {
    const { instance, engine } = this.host;
    if (instance.failure !== undefined) throw instance.failure;
    /** @type {Record<string, number>} */
    const stats = {};
    try {
      for (let i = 0; i < STATS.length; i++) stats[STATS[i]] = engine.query(QUERY_STAT, this.id, i, undefined);
    } catch (error) {
      throw instance.failed(error);
    }
    return stats;
  }
}

/**
 * The package's `createKeyedSerializer` for a platform (index.d.ts documents it).
 * @param {Hosts} hosts
 */
export function serializerApi(hosts) {
  /** @param {SerializerOptions} [options] */
  return function createKeyedSerializer(options) {
    const serializer = new Serializer(options, hosts);
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
