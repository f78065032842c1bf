// One run of store calls for a lock's ticket, as its core asks for them (see `Exchange`). Static
// JS, copied into pkg/ by the build.
import { LockStoreError } from '../errors.js';
import {
  LOCK_CREATE,
  LOCK_CREATED,
  LOCK_ERROR,
  LOCK_FAILED,
  LOCK_FREE_STATE,
  LOCK_HELD_STATE,
  LOCK_READ,
  LOCK_REPLACE,
  LOCK_REPLACED,
  LOCK_TIMED_OUT,
  MESSAGES,
  STORE_METHODS,
  fill,
} from '../constants.js';
import { describe } from '../arguments.js';

/**
 * The store calls the core asks for one ticket, from one step on, each bounded and fed back
 * through the one classifier, until the core asks for something else: `start(code, …)` is a
 * promise of that step's code — or of `then(code)`, run in the same reaction (an uncontended
 * acquisition or release is one store call: one promise hop less each), with `otherwise()` run
 * before a failure is passed on. A call that throws, rejects, answers something that is not a
 * store's answer or does not answer within its bound has failed; the core says what follows (a
 * write is read back), and a failure it does not resolve rejects with the first failed call's
 * LockStoreError. Once `abandon()`ed, answers still to come are not fed to the core. Each call
 * is bounded by `ms`, and none runs past `limit` (monotonic: an acquisition's whole bound;
 * Infinity for a held lock's calls).
 *
 * Its call in flight is watched by its manager's `Flights` (flights.js), which keeps the
 * exchange itself in its list while the call is out: `calls` numbers the calls, so an answer
 * that comes after its call timed out is told apart and ignored.
 */
export class Exchange {
  constructor(manager, name, ticket, ms, limit, then, otherwise) {
    this.manager = manager;
    this.name = name;
    this.ticket = ticket;
    this.bound = ms;
    this.limit = limit;
    this.then = then;
    this.otherwise = otherwise;
    this.failure = undefined;
    this.abandoned = false;
    this.resolve = undefined;
    this.reject = undefined;
    // The call in flight: its number, code, bound (ms) and deadline (monotonic), and the links
    // and timer flights.js keeps for it.
    this.calls = 0;
    this.code = 0;
    this.sent = 0; // when it was sent, on both clocks
    this.sentWall = 0;
    this.ms = 0;
    this.deadline = Infinity;
    this.previous = undefined;
    this.following = undefined;
    this.timer = undefined;
  }

  /**
   * Starts with the call `code` names, decided at `wall` (the manager's clock) and `now`
   * (monotonic): the promise of the step after.
   */
  start(code, wall, now) {
    const promise = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.call(code, wall, now);
    return promise;
  }

  /** Answers still to come are not fed to the core; the promise resolves with `code` now. */
  abandon(code) {
    this.abandoned = true;
    this.manager.flights.landed(this);
    this.resolve(code);
  }

  /** Makes the store call `code` names, its details in the core's outbox, at `wall` and `now`. */
  call(code, wall, now) {
    const { manager, name } = this;
    const { core, store } = manager;
    let value;
    let version;
    try {
      value = code === LOCK_READ ? undefined : core.value();
      version = code === LOCK_REPLACE ? core.version() : undefined;
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
    this.deadline = Math.min(now + this.bound, this.limit);
    this.ms = Math.max(0, this.deadline - now);
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

  answered(code, answer) {
    if (this.abandoned) return;
    // A write's answer is given to the core at the time the write was sent (no clock read): all
    // the core does with that time — a watch it starts, a read it bounds — is safe earlier. A
    // read's answer is timed as it comes: a watch starts then.
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
   * and `mono`.
   */
  classify(code, answer, wall, mono) {
    const { ticket } = this;
    const { core } = this.manager;
    if (code === LOCK_READ) {
      if (answer === null || answer === undefined) return core.stepRead(ticket, undefined, NaN, NaN, undefined, NaN, NaN, -1, wall, mono);
      if (typeof answer === 'object' && typeof answer.value === 'string' && typeof answer.version === 'string') {
        let record;
        try {
          record = JSON.parse(answer.value);
        } catch {
          record = undefined;
        }
        // Not an object: not ours; the core checks every field of one that is.
        if (record === null || typeof record !== 'object') record = {};
        // -1: no lease (a record from before the field); NaN: one that is not a lease.
        const lease = record.lease === undefined ? -1 : typeof record.lease === 'number' && record.lease >= 0 ? record.lease : NaN;
        const state = record.state === 'held' ? LOCK_HELD_STATE : record.state === 'free' ? LOCK_FREE_STATE : NaN;
        return core.stepRead(ticket, answer.version, numberOr(record.keyturn), state, stringOr(record.token), numberOr(record.fence), numberOr(record.at), lease, wall, mono);
      }
      return wrongAnswer(code, '{ value: string, version: string } or null', answer);
    }
    if (typeof answer === 'string' || answer === null || answer === undefined) {
      return core.step(ticket, code === LOCK_CREATE ? LOCK_CREATED : LOCK_REPLACED, answer ?? undefined, wall, mono);
    }
    return wrongAnswer(code, 'a version string or null', answer);
  }

  failed(code, cause) {
    const message = cause instanceof Error ? cause.message : String(cause);
    this.fail(new LockStoreError(fill(MESSAGES.storeFailed, { method: STORE_METHODS[code], message }), { cause }), LOCK_FAILED);
  }

  /** A call failed (`kind`: `FAILED` or `TIMED_OUT`) with `error`: the core says what follows. */
  fail(error, kind) {
    if (this.abandoned) return;
    this.failure ??= error;
    const { manager } = this;
    const now = performance.now();
    const wall = manager.time();
    let next;
    try {
      manager.alive();
      next = manager.core.step(this.ticket, kind, undefined, wall, now);
    } catch (trapped) {
      this.end(manager.failed(trapped));
      return;
    }
    this.next(next, wall, now);
  }

  /**
   * The core's next step, decided at `wall` and `now`: another call, the failure reported, or
   * the end of the exchange.
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

  end(error) {
    this.otherwise?.();
    this.reject(error);
  }
}

function wrongAnswer(code, expected, answer) {
  return new LockStoreError(fill(MESSAGES.storeWrongAnswer, { method: STORE_METHODS[code], actual: describe(answer), expected }));
}

// A record's fields as the core takes them: a number or NaN, a string or undefined.
const numberOr = (value) => (typeof value === 'number' ? value : NaN);
const stringOr = (value) => (typeof value === 'string' ? value : undefined);
