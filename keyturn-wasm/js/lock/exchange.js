// One run of store calls for a lock's ticket, as its core asks for them (see `Exchange`). Static
// JS, copied into pkg/ by the build.
import { LockStoreError } from '../errors.js';
import {
  LOCK_CREATE,
  LOCK_CREATED,
  LOCK_ERROR,
  LOCK_FAILED,
  LOCK_GIVE_UP,
  LOCK_HELD,
  LOCK_READ,
  LOCK_REPLACE,
  LOCK_REPLACED,
  LOCK_TIMED_OUT,
  MESSAGES,
  STORE_METHODS,
  fill,
} from '../constants.js';
import { describe } from '../arguments.js';

/** @typedef {import('./manager.js').Manager} Manager */
/** @typedef {import('./manager.js').Waiter} Waiter */
/** @typedef {import('../keyturn_lock.js').LockCoreBinding} LockCoreBinding */

/**
 * The store calls the core asks for one ticket, from one step on, each bounded as its step
 * says and fed back through the one classifier, until the core asks for something else:
 * `start(code, …)` is a promise of that step's code — or of `then(code)`, run in the same
 * reaction (an uncontended acquisition or release is one store call: one promise hop less
 * each), with `otherwise()` run before a failure is passed on. A call that throws, rejects,
 * answers something that is not a store's answer or does not answer within its bound has
 * failed; the core says what follows (a write is read back), and a failure it does not resolve
 * rejects with the first failed call's LockStoreError. Once `abandon()`ed, answers still to
 * come are not fed to the core.
 *
 * Its call in flight is watched by its manager's `Flights` (flights.js), which keeps the
 * exchange itself in its list while the call is out: `calls` numbers the calls, so an answer
 * that comes after its call timed out is told apart and ignored.
 */
export class Exchange {
  /**
   * @param {Manager} manager
   * @param {string} name
   * @param {number} ticket
   * @param {(code: number) => unknown} [then]
   * @param {() => void} [otherwise]
   */
  constructor(manager, name, ticket, then, otherwise) {
    this.manager = manager;
    this.name = name;
    this.ticket = ticket;
    this.then = then;
    this.otherwise = otherwise;
    /** @type {Waiter | undefined} an acquisition's, let go if the exchange fails */
    this.waiter = undefined;
    /** @type {LockStoreError | undefined} */
    this.failure = undefined;
    this.abandoned = false;
    /** @type {(value: any) => void} */
    this.resolve = ignore;
    /** @type {(error: unknown) => void} */
    this.reject = ignore;
    // The call in flight: its number, code, bound (ms) and deadline (monotonic), and the links
    // and timer flights.js keeps for it.
    this.calls = 0;
    this.code = 0;
    this.sent = 0; // when it was sent, on both clocks
    this.sentWall = 0;
    this.ms = 0;
    this.deadline = Infinity;
    /** @type {Exchange | undefined} */
    this.previous = undefined;
    /** @type {Exchange | undefined} */
    this.following = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @type {StepDetails | undefined} the details of the step it resolved with */
    this.view = undefined;
  }

  /**
   * Starts with the call `code` names, decided at `wall` (the manager's clock) and `now`
   * (monotonic): the promise of the step after (or of what `then` makes of it).
   * @param {number} code
   * @param {number} wall
   * @param {number} now
   * @returns {Promise<any>}
   */
  start(code, wall, now) {
    const promise = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.call(code, wall, now);
    return promise;
  }

  /**
   * Answers still to come are not fed to the core; the promise resolves with `code` now.
   * @param {number} code
   */
  abandon(code) {
    this.abandoned = true;
    this.manager.flights.landed(this);
    this.resolve(code);
  }

  /**
   * Makes the store call `code` names, its details in the core's step view, sent at `wall` and
   * `now`.
   * @param {number} code
   * @param {number} wall
   * @param {number} now
   */
  call(code, wall, now) {
    const { manager, name } = this;
    const { core, store } = manager;
    let value = '';
    let version;
    let bound;
    try {
      if (code !== LOCK_READ) value = core.record();
      if (code === LOCK_REPLACE) version = core.version();
      bound = core.boundMs();
    } catch (error) {
      this.end(manager.failed(error));
      return;
    }
    let call;
    try {
      call = code === LOCK_CREATE ? store.create(name, value) : code === LOCK_READ ? store.read(name) : store.replace(name, version, value);
    } catch (error) {
      this.failed(code, error);
      return;
    }
    const number = ++this.calls;
    this.code = code;
    this.sent = now;
    this.sentWall = wall;
    this.ms = bound;
    this.deadline = now + bound;
    Promise.resolve(call).then(
      (answer) => {
        if (this.calls === number && manager.flights.landed(this)) this.answered(code, answer);
      },
      (error) => {
        if (this.calls === number && manager.flights.landed(this)) this.failed(code, error);
      },
    );
    manager.flights.watch(this);
  }

  /** The call in flight passed its bound (flights.js). */
  timedOut() {
    const { code } = this;
    this.calls += 1; // its answer, if it comes, is ignored
    this.fail(new LockStoreError(fill(MESSAGES.storeTimedOut, { method: STORE_METHODS[code], storeTimeoutMs: this.ms })), LOCK_TIMED_OUT);
  }

  /**
   * @param {number} code
   * @param {unknown} answer
   */
  answered(code, answer) {
    if (this.abandoned) return;
    // A write's answer is given to the core at the time the write was sent (no clock read): all
    // the core does with that time — a watch of the version it wrote, whose lease runs from
    // then too, and the read that follows a refusal — holds from then. A read's answer is timed
    // as it comes: a watch of what it found starts then.
    const read = code === LOCK_READ;
    const now = read ? performance.now() : this.sent;
    const wall = read ? this.manager.time() : this.sentWall;
    let next;
    try {
      next = this.classify(code, answer, wall, now);
    } catch (error) {
      this.end(this.manager.failed(error));
      return;
    }
    if (typeof next === 'number') this.next(next, wall, now);
    else this.fail(next, LOCK_FAILED);
  }

  /**
   * The one answer classifier: what the store said, fed to the core — the next step's code — or
   * the LockStoreError for an answer that is no store's (the core not told), taken at `wall`
   * and `mono`. A record's text is read by `JSON.parse` (no JSON parser in the wasm), and its
   * fields go to the core as they are: whether they make a record of ours is its to say.
   * @param {number} code
   * @param {unknown} answer
   * @param {number} wall
   * @param {number} mono
   * @returns {number | LockStoreError}
   */
  classify(code, answer, wall, mono) {
    const { ticket, manager } = this;
    const { core } = manager;
    if (code === LOCK_READ) {
      if (answer === null || answer === undefined) return manager.code(core.answerRead(ticket, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined, wall, mono));
      const { value, version } = /** @type {{ value?: unknown, version?: unknown }} */ (answer);
      if (typeof answer === 'object' && typeof value === 'string' && typeof version === 'string') {
        const record = parsed(value);
        return manager.code(core.answerRead(
          ticket,
          version,
          numberField(record.keyturn),
          stringField(record.state),
          stringField(record.token),
          numberField(record.fence),
          numberField(record.at),
          numberField(record.lease),
          stringField(record.asks),
          numberField(record.n),
          wall,
          mono,
        ));
      }
      return wrongAnswer(code, '{ value: string, version: string } or null', answer);
    }
    if (typeof answer === 'string' || answer === null || answer === undefined) {
      return manager.code(core.answer(ticket, code === LOCK_CREATE ? LOCK_CREATED : LOCK_REPLACED, answer ?? undefined, wall, mono));
    }
    return wrongAnswer(code, 'a version string or null', answer);
  }

  /**
   * @param {number} code
   * @param {unknown} cause
   */
  failed(code, cause) {
    const message = cause instanceof Error ? cause.message : String(cause);
    this.fail(new LockStoreError(fill(MESSAGES.storeFailed, { method: STORE_METHODS[code], message }), { cause }), LOCK_FAILED);
  }

  /**
   * A call failed (`kind`: `FAILED` or `TIMED_OUT`) with `error`: the core says what follows.
   * @param {LockStoreError} error
   * @param {number} kind
   */
  fail(error, kind) {
    if (this.abandoned) return;
    this.failure ??= error;
    const { manager } = this;
    const now = performance.now();
    const wall = manager.time();
    let next;
    try {
      manager.alive();
      next = manager.code(manager.core.answer(this.ticket, kind, undefined, wall, now));
    } catch (trapped) {
      this.end(manager.failed(trapped));
      return;
    }
    this.next(next, wall, now);
  }

  /**
   * The core's next step, decided at `wall` and `now`: another call, the failure reported, or
   * the end of the exchange.
   * @param {number} code
   * @param {number} wall
   * @param {number} now
   */
  next(code, wall, now) {
    const { manager } = this;
    if (code === LOCK_CREATE || code === LOCK_READ || code === LOCK_REPLACE) {
      this.call(code, wall, now);
      return;
    }
    if (code === LOCK_ERROR) {
      try {
        manager.drain();
      } catch (error) {
        this.end(manager.failed(error));
        return;
      }
      this.end(this.failure);
      return;
    }
    if (this.then === undefined) {
      // The step's details, kept now: the core's view is shared, and another ticket's step may
      // fill it before this promise's reaction runs.
      if (code !== LOCK_HELD && code !== LOCK_GIVE_UP) this.view = new StepDetails(manager.core);
      this.resolve(code);
      return;
    }
    let result;
    try {
      manager.drain();
      result = this.then(code);
    } catch (error) {
      this.end(manager.failed(error));
      return;
    }
    this.resolve(result);
  }

  /** @param {unknown} error */
  end(error) {
    if (this.waiter !== undefined) this.manager.letGo(this.waiter);
    this.otherwise?.();
    this.reject(error);
  }
}

/** @param {unknown} _ */
function ignore(_) {}

/** What a sleep, wait, watch or mismatch step carries, read from the core's view when it came. */
export class StepDetails {
  /** @param {LockCoreBinding} core */
  constructor(core) {
    this.at = core.wakeAt();
    this.watched = core.version();
    this.concurrency = core.found();
  }

  wakeAt() {
    return this.at;
  }

  version() {
    return this.watched;
  }

  found() {
    return this.concurrency;
  }
}

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
 * A record's number field as the core takes it: its number, `undefined` where it is absent,
 * `NaN` where it is there with another type (no rule of the core takes `NaN`).
 * @param {unknown} value
 */
const numberField = (value) => (typeof value === 'number' ? value : value === undefined ? undefined : NaN);

/**
 * A record's string field as the core takes it: its string, or `undefined`.
 * @param {unknown} value
 */
const stringField = (value) => (typeof value === 'string' ? value : undefined);

/**
 * @param {number} code
 * @param {string} expected
 * @param {unknown} answer
 */
function wrongAnswer(code, expected, answer) {
  return new LockStoreError(fill(MESSAGES.storeWrongAnswer, { method: STORE_METHODS[code], actual: describe(answer), expected }));
}
