// One wasm engine as the package's JS runs it: the one apply loop (docs/design.md, "The front
// ends"). It decides nothing: every rule, time and bound is the engine's; its only arithmetic
// turns an engine time into a timer delay. Static JS, copied into pkg/ by the build.
import { LockStoreError } from './errors.js';
import {
  ANSWER_CHANGED,
  ANSWER_CREATED,
  ANSWER_FAILED,
  ANSWER_READ,
  ANSWER_REPLACED,
  ANSWER_UNCHANGED,
  DETAIL_KEY,
  DETAIL_VERSION,
  EFFECT_FORGET,
  EFFECT_NONE,
  EFFECT_STORE,
  EFFECT_WAKE,
  EVENT_TICK,
  EVENT_TIMER_REFUSED,
  FIELD_ALIVE,
  FIELD_AT,
  FIELD_EARLY,
  FIELD_HANDLE,
  FIELD_KEEP,
  FIELD_KEY_TOLD,
  FIELD_METHOD,
  FIELD_MORE,
  FIELD_MS,
  FIELD_OP,
  FIELD_RECORD,
  FIELD_RECORD_LEN,
  MESSAGES,
  METHOD_CHANGED,
  METHOD_CREATE,
  METHOD_NAMES,
  METHOD_READ,
  METHOD_REPLACE,
  QUERY_REGISTER,
  REGISTER_LEN,
  fill,
} from './constants.js';
import { describe } from './arguments.js';
import { clear, delayTo, keepAlive } from './timers.js';
import { channels, storeCalled } from './tracing.js';

/** @typedef {import('./instance.js').Instance} Instance */

/**
 * The JS object an effect names (a serializer's job, a lock's call): it answers the effects it gets.
 * @typedef {object} Target
 * @property {(host: Host, kind: number) => void} effect
 * @property {Box} box on Workers: what is posted to it
 */

/**
 * A store: three atomic methods (and whatever else it has).
 * @typedef {object} Store
 * @property {(key: string, value: string) => unknown} create
 * @property {(key: string) => unknown} read
 * @property {(key: string, version: unknown, value: string) => unknown} replace
 * @property {((key: string, version: unknown, ms: number) => unknown) | undefined} [changed]
 */

export class Host {
  /**
   * @param {any} glue the module's generated JS (its `Engine` class, its `initSync`)
   * @param {Instance} instance the module's live instance
   * @param {Store | undefined} store
   * @param {(() => number) | undefined} now the wall clock records carry (`Date.now` by default)
   * @param {boolean} perCall a timer per call, in its own context (Workers)
   */
  constructor(glue, instance, store, now, perCall) {
    this.instance = instance;
    this.engine = new glue.Engine(perCall, perCall, typeof store?.changed === 'function');
    // The module's memory, from its exports: once the module is initialized the glue's
    // `initSync` answers them (the fresh instance's after `__wbg_reset_state`). Not asked of
    // the engine: a wasm export answering a JS value costs the module its externref table code.
    /** @type {WebAssembly.Memory} */
    this.memory = glue.initSync().memory;
    this.at = this.engine.query(QUERY_REGISTER, 0, undefined, undefined) / 8;
    this.register = new Float64Array(this.memory.buffer);
    /** The module's memory as bytes (see `fields`). */
    this.bytes = new Uint8Array(this.memory.buffer);
    this.store = store;
    this.now = now;
    /** This isolate's id in tokens, asked of the engine once (see `KeyturnLock.token`). */
    this.isolateId = /** @type {string | undefined} */ (undefined);
    /** The store call's key the engine last gave (see `storeKey`). */
    this.key = '';
    this.last = 0;
    this.perCall = perCall;
    /** @type {ReturnType<typeof setTimeout> | undefined} the one timer, off Workers */
    this.timer = undefined;
    this.timerAt = Infinity;
    /** @type {unknown} the last timer refusal, for the call given up on */
    this.refusal = undefined;
    /** On Workers: the handle of the call whose own request runs now (-1: none known). */
    this.origin = -1;
    /** @type {number[] | undefined} the fields of an effect done from its call's request */
    this.posted = undefined;
    /** @type {Posted[]} effects done from their calls' requests, kept to be posted again (see `post`) */
    this.spare = [];
    /**
     * While the callback of a timer that may fire early runs (a pause between polls), the time
     * it was armed for: it counts as on time. Any other timer is timed by the clock: Node arms a
     * timer from a time it cached, which under load is milliseconds old, so its timers fire
     * that early — a pace must not start a work early, so the engine is told the real time and
     * arms again for what is left.
     */
    this.due = 0;
    /** Whether the one timer may fire early (`wake`'s `early`). */
    this.timerEarly = false;
    this.tick = () => {
      const at = this.timerAt;
      this.timer = undefined;
      this.timerAt = Infinity;
      this.fire(at, this.timerEarly, () => this.event(EVENT_TICK, 0, 0));
    };
  }

  /**
   * The register's view, made again once the memory grew (growing detaches the old buffer, whose
   * views then have no elements: cheaper to ask than the memory's `buffer`).
   */
  fields() {
    let register = this.register;
    if (register.length === 0) register = this.register = new Float64Array(this.memory.buffer);
    return register;
  }

  /** The monotonic time (see `due`). */
  mono() {
    const now = performance.now();
    return now > this.due ? now : this.due;
  }

  /**
   * Calls `fired`, a timer's callback, for a timer armed for `at` (`early`: one that may fire
   * early).
   * @param {number} at
   * @param {boolean} early
   * @param {() => void} fired
   */
  fire(at, early, fired) {
    this.due = early ? at : 0;
    try {
      fired();
    } finally {
      this.due = 0;
    }
  }

  /**
   * `now()`, or its last good answer when it gives something other than a finite number (or,
   * unless `strict`, throws).
   * @param {boolean} [strict]
   */
  wall(strict) {
    if (this.now === undefined) return (this.last = Date.now());
    let now;
    try {
      now = this.now();
    } catch (error) {
      if (strict) throw error;
      return this.last;
    }
    if (typeof now === 'number' && Number.isFinite(now)) this.last = now;
    return this.last;
  }

  /**
   * An event (`wire::event`) of `a` and `b`, at this time; its effects done as from the own
   * request of the call held as `origin`.
   * @param {number} kind
   * @param {number} a
   * @param {number} b
   * @param {number} [origin]
   */
  event(kind, a, b, origin = this.origin) {
    try {
      this.applyAs(origin, this.engine.event(kind, a, b, this.wall(), this.mono()));
    } catch (error) {
      this.instance.failed(error);
    }
  }

  /**
   * The one apply loop: does what each effect says, from `kind` on, until none is left. On
   * Workers an effect for a call whose own request this is not is posted to that call (`post`).
   * @param {number} kind
   */
  apply(kind) {
    if (this.posted !== undefined) return this.nested(kind);
    const { engine, instance } = this;
    while (kind !== EFFECT_NONE) {
      const fields = this.fields();
      const at = this.at;
      const handle = fields[at + FIELD_HANDLE];
      const alive = fields[at + FIELD_ALIVE];
      // (Before the effect: what it does may call the engine, whose later changes come after.)
      if (alive !== 0 && this.timer !== undefined) keepAlive(this.timer, alive === 1);
      if (kind === EFFECT_WAKE) this.wake(fields[at + FIELD_AT], fields[at + FIELD_KEEP] === 1, fields[at + FIELD_EARLY] === 1);
      else if (kind === EFFECT_FORGET) this.forget(handle, fields[at + FIELD_METHOD], fields[at + FIELD_MS]);
      else if (this.perCall && handle >= 0 && handle !== this.origin) this.post(kind, /** @type {Target} */ (instance.get(handle)));
      else if (kind === EFFECT_STORE) this.storeCall(fields[at + FIELD_OP], fields[at + FIELD_METHOD], fields[at + FIELD_MS], handle);
      else /** @type {Target} */ (instance.get(handle))?.effect(this, kind);
      kind = this.fields()[at + FIELD_MORE] === 1 ? engine.next() : EFFECT_NONE;
    }
  }

  /**
   * Effects answered while one posted to a call is done (what its work or its caller's
   * handlers call at once): done as any, their fields the register's.
   * @param {number} kind
   */
  nested(kind) {
    const posted = this.posted;
    this.posted = undefined;
    try {
      this.apply(kind);
    } finally {
      this.posted = posted;
    }
  }

  /**
   * Field `field` of the effect being done: the register's, or the posted effect's.
   * @param {number} field
   */
  field(field) {
    const posted = this.posted;
    return posted !== undefined ? posted[field] : this.fields()[this.at + field];
  }

  /**
   * Field `field` of what the engine call just made answered (never a posted effect's).
   * @param {number} field
   */
  read(field) {
    return this.fields()[this.at + field];
  }

  /** The key of the store call just asked for: the one the engine last gave, unless it says this is another. */
  storeKey() {
    if (this.read(FIELD_KEY_TOLD) !== 1) this.key = this.engine.detail(DETAIL_KEY);
    return this.key;
  }

  /**
   * The record the store call just asked for writes, if its method writes one.
   * @param {number} method
   * @returns {string | undefined}
   */
  record(method) {
    if (method !== METHOD_CREATE && method !== METHOD_REPLACE) return undefined;
    // Read where the module keeps it: no call into it, nor out of it to make the string.
    let bytes = this.bytes;
    if (bytes.length === 0) bytes = this.bytes = new Uint8Array(this.memory.buffer);
    const at = this.read(FIELD_RECORD);
    return UTF8.decode(bytes.subarray(at, at + this.read(FIELD_RECORD_LEN)));
  }

  /**
   * The version the store call just asked for names, if its method names one.
   * @param {number} method
   * @returns {unknown}
   */
  version(method) {
    return method === METHOD_REPLACE || method === METHOD_CHANGED ? this.engine.detail(DETAIL_VERSION) : undefined;
  }

  /**
   * The store call just asked for, made now (`call`) with its details.
   * @param {number} op
   * @param {number} method
   * @param {number} ms
   * @param {number} owner
   */
  storeCall(op, method, ms, owner) {
    this.call(op, method, ms, owner, this.storeKey(), this.record(method), this.version(method));
  }

  /**
   * On Workers: the effect just answered, for `target`, done from `target`'s own request — a
   * timer or I/O started from another request's context ends with that request, and a work
   * runs in its own caller's. Its fields (and a store call's details) are kept until then.
   * @param {number} kind
   * @param {Target | undefined} target
   */
  post(kind, target) {
    if (target === undefined) return;
    // One done is posted again (a burst of calls posts a few per call: none is garbage).
    const posted = this.spare.pop() ?? new Posted();
    // (A plain array: a small typed array's copy costs a buffer of its own.)
    const register = this.fields();
    const fields = posted.fields;
    for (let i = 0; i < REGISTER_LEN; i++) fields[i] = register[this.at + i];
    const method = fields[FIELD_METHOD];
    posted.kind = kind;
    posted.target = target;
    posted.details = kind === EFFECT_STORE ? [this.storeKey(), this.record(method), this.version(method)] : undefined;
    const box = target.box;
    // (Last in its box's list: a frozen box, where nothing is posted, throws.)
    let last = box.mail;
    if (last === undefined) box.mail = posted;
    else {
      while (last.next !== undefined) last = last.next;
      last.next = posted;
    }
    const doors = box.doors;
    if (doors instanceof Door) doors.ring();
    else if (doors !== undefined) for (let i = 0; i < doors.length; i++) doors[i].ring();
  }

  /**
   * On Workers: what was posted to `box` (its call's handle `handle`), done — from its own
   * request, by one of its doors.
   * @param {Box} box
   * @param {number} handle
   */
  deliver(box, handle) {
    let posted = box.mail;
    box.mail = undefined;
    if (posted === undefined || this.instance.failure !== undefined) return;
    const origin = this.origin;
    this.origin = handle;
    try {
      while (posted !== undefined) {
        /** @type {Posted | undefined} */
        const next = posted.next;
        this.done(posted);
        posted = next;
      }
    } finally {
      this.origin = origin;
    }
  }

  /**
   * An effect posted to its call, done (from its own request); then kept to be posted again.
   * @param {Posted} posted
   */
  done(posted) {
    const { kind, target, fields, details } = posted;
    posted.next = undefined;
    posted.target = undefined;
    posted.details = undefined;
    try {
      if (details !== undefined) {
        this.call(fields[FIELD_OP], fields[FIELD_METHOD], fields[FIELD_MS], fields[FIELD_HANDLE], ...details);
        return;
      }
      this.posted = fields;
      try {
        /** @type {Target} */ (target).effect(this, kind);
      } finally {
        this.posted = undefined;
      }
    } finally {
      if (this.spare.length < SPARE) this.spare.push(posted);
    }
  }

  /**
   * `apply(kind)` as from the own request of the call held as `handle`.
   * @param {number} handle
   * @param {number} kind
   */
  applyAs(handle, kind) {
    const origin = this.origin;
    this.origin = handle;
    try {
      this.apply(kind);
    } finally {
      this.origin = origin;
    }
  }

  /**
   * The one timer, armed for `at` (monotonic; Infinity: cleared), keeping a Node or Deno
   * process alive (`keep`: something waits on it) or only guarding. A new timer first, so a
   * refusal (past a platform's quota) leaves the old one. A pause between polls (`early`) is
   * armed for its time as it is, not rounded up.
   * @param {number} at
   * @param {boolean} keep
   * @param {boolean} early
   */
  wake(at, keep, early) {
    if (at !== this.timerAt) {
      const old = this.timer;
      try {
        this.timer = at === Infinity ? undefined : setTimeout(this.tick, delayTo(at, early));
      } catch (error) {
        this.refused(error, -1, -1);
        return;
      }
      this.timerAt = at;
      this.timerEarly = early;
      clear(old);
    }
    if (this.timer !== undefined) keepAlive(this.timer, keep);
  }

  /**
   * The host refused a timer the engine asked for (a platform's quota, a fault): the engine
   * gives up on the call it was for — `a`, `b` as `wire::event`'s `TIMER_REFUSED` says — whose
   * caller gets `error`.
   * @param {unknown} error
   * @param {number} a
   * @param {number} b
   */
  refused(error, a, b) {
    this.refusal = error;
    this.event(EVENT_TIMER_REFUSED, a, b);
  }

  /**
   * `ARM`: a call's own timer, as the effect being done says (Workers: armed in its own
   * request's context, so that it fires though the request that woke the engine ended), kept
   * and fired early as `wake`'s; `fired` is called when it fires. Refused, the engine gives up
   * on the call (`a`, `b`: see `refused`).
   * @param {{ timer?: ReturnType<typeof setTimeout> }} owner
   * @param {() => void} fired
   * @param {number} a
   * @param {number} b
   */
  arm(owner, fired, a, b) {
    const at = this.field(FIELD_AT);
    const early = this.field(FIELD_EARLY) === 1;
    clear(owner.timer);
    try {
      owner.timer = setTimeout(() => {
        owner.timer = undefined;
        this.fire(at, early, fired);
      }, delayTo(at, early));
      keepAlive(owner.timer, this.field(FIELD_KEEP) === 1);
    } catch (error) {
      owner.timer = undefined;
      this.refused(error, a, b);
    }
  }

  /**
   * A store call passed its bound: its call's first failure, unless it has one.
   * @param {number} owner
   * @param {number} method
   * @param {number} ms
   */
  forget(owner, method, ms) {
    this.blame(owner, new LockStoreError(fill(MESSAGES.storeTimedOut, { method: METHOD_NAMES[method], storeTimeoutMs: ms })));
  }

  /**
   * The call held as `owner` (-1: none) failed with `error`, unless it failed before: its
   * caller hears its first failure.
   * @param {number} owner
   * @param {LockStoreError} error
   */
  blame(owner, error) {
    const target = /** @type {{ failure?: unknown } | undefined} */ (owner >= 0 ? this.instance.get(owner) : undefined);
    if (target !== undefined && target.failure === undefined) target.failure = error;
  }

  /**
   * Makes the store call `op`, for the call held as `owner` (-1: none), of `key`, `record` and
   * `version`. Its answer goes back through the one classifier — on Workers, as from the
   * owner's request, where it was made; a call that throws, rejects or answers what no store
   * answers has failed (its error is the owner's to report). Its bound is the engine's.
   * @param {number} op
   * @param {number} method
   * @param {number} ms a watch's length
   * @param {number} owner
   * @param {string} key
   * @param {string | undefined} record
   * @param {unknown} version
   */
  call(op, method, ms, owner, key, record, version) {
    const { store } = this;
    /** @type {unknown} */
    let answer;
    try {
      const s = /** @type {Store} */ (store);
      if (method === METHOD_CREATE) answer = s.create(key, /** @type {string} */ (record));
      else if (method === METHOD_READ) answer = s.read(key);
      else if (method === METHOD_REPLACE) answer = s.replace(key, version, /** @type {string} */ (record));
      else answer = /** @type {NonNullable<Store['changed']>} */ (s.changed).call(s, key, version, ms);
    } catch (error) {
      answer = Promise.reject(error);
    }
    // (Timed only while `keyturn:store` has a subscriber.)
    const sentAt = channels !== undefined && channels.store.hasSubscribers ? performance.now() : NaN;
    Promise.resolve(answer).then(
      (value) => this.heard(op, method, owner, key, sentAt, true, value),
      (error) => this.heard(op, method, owner, key, sentAt, false, error),
    );
  }

  /**
   * The store call `op` of `key`, sent at `sentAt`, settled: with `value` (`ok`), or failed
   * with it. Its effects are done as from its owner's own request.
   * @param {number} op
   * @param {number} method
   * @param {number} owner
   * @param {string} key
   * @param {number} sentAt
   * @param {boolean} ok
   * @param {unknown} value
   */
  heard(op, method, owner, key, sentAt, ok, value) {
    if (!Number.isNaN(sentAt)) storeCalled(/** @type {import('./tracing.js').Channels} */ (channels).store, method, key, sentAt, ok, value);
    if (ok) return this.answered(op, method, value, owner);
    const message = value instanceof Error ? value.message : String(value);
    this.fail(op, owner, new LockStoreError(fill(MESSAGES.storeFailed, { method: METHOD_NAMES[method], message }), { cause: value }));
  }

  /**
   * @param {number} op
   * @param {number} method
   * @param {unknown} value
   * @param {number} owner
   */
  answered(op, method, value, owner) {
    if (this.instance.failure !== undefined) return;
    const mono = performance.now();
    let kind;
    try {
      if (method === METHOD_READ) {
        if (value === null || value === undefined) kind = this.engine.answer(op, ANSWER_READ, undefined, false, this.wall(), mono);
        else {
          const { value: text, version } = /** @type {{ value?: unknown, version?: unknown }} */ (value);
          if (typeof value !== 'object' || typeof text !== 'string' || typeof version !== 'string') {
            return this.fail(op, owner, wrongAnswer(method, '{ value: string, version: string } or null', value));
          }
          const record = parsed(text);
          kind = this.engine.answerRead(op, version, numberField(record.keyturn), stringField(record.state), stringField(record.token), numberField(record.fence), numberField(record.at), numberField(record.lease), stringField(record.asks), stringField(record.starts), numberField(record.n), this.wall(), mono);
        }
      } else if (method === METHOD_CREATE || method === METHOD_REPLACE) {
        if (typeof value !== 'string' && value !== null && value !== undefined) return this.fail(op, owner, wrongAnswer(method, 'a version string or null', value));
        // (The engine times a write's answer from when it was sent; what else this answer
        // moves — a hand-on, a waiter's write — is stamped now.)
        kind = this.engine.answer(op, method === METHOD_CREATE ? ANSWER_CREATED : ANSWER_REPLACED, value ?? undefined, typeof value === 'string', this.wall(), mono);
      } else {
        // A watch: changed or not, the record is read again; an answer not a boolean failed.
        const answer = value === true ? ANSWER_CHANGED : value === false ? ANSWER_UNCHANGED : ANSWER_FAILED;
        kind = this.engine.answer(op, answer, undefined, false, this.wall(), mono);
      }
      this.applyAs(owner, kind);
    } catch (error) {
      this.instance.failed(error);
    }
  }

  /**
   * A store call failed with `error`: its owner's first failure; the engine says what follows.
   * @param {number} op
   * @param {number} owner
   * @param {LockStoreError} error
   */
  fail(op, owner, error) {
    if (this.instance.failure !== undefined) return;
    this.blame(owner, error);
    try {
      this.applyAs(owner, this.engine.answer(op, ANSWER_FAILED, undefined, false, this.wall(), performance.now()));
    } catch (trapped) {
      this.instance.failed(trapped);
    }
  }
}


/**
 * On Workers: what is posted to a call (see `Host.post`) and the doors it is delivered by.
 * @typedef {object} Box
 * @property {Posted | undefined} mail the first of what is posted to it (each names the next)
 * @property {Door | Door[] | undefined} doors its call's first request's door, or each of its requests'
 */

/** How many done posted effects a host keeps to post again. */
const SPARE = 64;

/**
 * On Workers: an effect posted to its call, and what it needs kept until it is done; once done,
 * kept to be posted again.
 */
export class Posted {
  constructor() {
    this.kind = 0;
    /** @type {Target | undefined} */
    this.target = undefined;
    /** @type {number[]} the register's fields, copied */
    this.fields = new Array(REGISTER_LEN).fill(0);
    /** @type {[string, string | undefined, unknown] | undefined} a store call's key, record and version */
    this.details = undefined;
    /** @type {Posted | undefined} the next posted to the same call */
    this.next = undefined;
  }
}

/** @type {Door | undefined} the door whose next promise is being made (`hinge` is its executor: no closure per door) */
let hanging;

/**
 * A door's promise's executor: the door keeps the promise's `resolve`.
 * @param {(door: Door) => void} resolve
 */
function hinge(resolve) {
  /** @type {Door} */ (hanging).open = resolve;
}

/**
 * The reaction of a door's promise, which settles with the door: its next promise is made, in
 * the same request, and its call's mail done.
 * @param {Door} door
 */
function opened(door) {
  door.listen();
  door.host.deliver(door.box, door.handle);
}

/**
 * On Workers: one of a call's requests (its caller's; a coalescing work's every caller's),
 * through which what is posted to the call is done: a promise reaction registered there. Each
 * ring opens the current promise; the reaction makes the next one, in the same request.
 */
export class Door {
  /**
   * @param {Host} host
   * @param {Box} box
   * @param {number} handle its call's
   */
  constructor(host, box, handle) {
    this.host = host;
    this.box = box;
    this.handle = handle;
    /** @type {((door: Door) => void) | undefined} */
    this.open = undefined;
    this.listen();
    if (box.mail !== undefined) this.ring();
  }

  listen() {
    hanging = this;
    new Promise(hinge).then(opened);
    hanging = undefined;
  }

  ring() {
    const open = this.open;
    this.open = undefined;
    open?.(this);
  }
}

/**
 * A store's answer that is not what its method answers.
 * @param {number} method
 * @param {string} expected
 * @param {unknown} value
 */
const wrongAnswer = (method, expected, value) => new LockStoreError(fill(MESSAGES.storeWrongAnswer, { method: METHOD_NAMES[method], actual: describe(value), expected }));

/** The records a store call writes are UTF-8 in the module's memory. */
const UTF8 = new TextDecoder();

/**
 * A record's text as `JSON.parse` reads it: its fields, or none for a text that is not a JSON
 * object (then it is not ours).
 * @param {string} text
 * @returns {Record<string, unknown>}
 */
function parsed(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return {};
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {};
}

/**
 * A record's number field as the engine takes it: its number, `undefined` where it is absent,
 * `NaN` where it is there with another type (no rule takes `NaN`).
 * @param {unknown} value
 */
const numberField = (value) => (typeof value === 'number' ? value : value === undefined ? undefined : NaN);

/**
 * A record's string field as the engine takes it: its string, or `undefined`.
 * @param {unknown} value
 */
const stringField = (value) => (typeof value === 'string' ? value : undefined);
