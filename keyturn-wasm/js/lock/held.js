// A held lock, as `acquireLock` answers it: a handle on a ticket the lock's core keeps until the
// lock is released or lost. Every decision — renewal, release, hand-off — is the core's; this
// class makes the store call it asks for (through its manager's `exchange`) and keeps the
// JavaScript surface: `signal`, `renew`, `release`, `await using`.
import { LOCK_DONE, LOCK_HELD, LOCK_READ, LOCK_REPLACE, MESSAGES, fill } from '../constants.js';
import { Exchange } from './exchange.js';
import { unref } from '../timers.js';

/** @typedef {import('./manager.js').Manager} Manager */

/** The serializer's release, which announces the works queued behind the next one. */
export const HAND_ON = Symbol('keyturn.handOn');

/** Renews while its holder works (`withLock`, a serializer's turn): see `KeyturnLock[KEEP_RENEWED]`. */
export const KEEP_RENEWED = Symbol('keyturn.keepRenewed');

const released = Promise.resolve();

/**
 * @param {string} template
 * @param {string} name
 */
const lostReason = (template, name) => new DOMException(`keyturn: ${fill(template, { name })}`, 'AbortError');


/**
 * A held lock: its `name`, its `token` (in the record while held; shared within one hand-off
 * batch), its `fence` (rises with every acquisition of the name) and `heldUntil` (its lease
 * end, moved by `renew`).
 */
export class KeyturnLock {
  /** @type {Manager} */
  #manager;
  /** @type {number} */
  #ticket;
  /** @type {string} The record it holds: its name's, or its slot's. */
  #key;
  /** @type {string} */
  #name;
  /** @type {number} */
  #slot;
  /** @type {number} */
  #fence;
  /** @type {number} The count in its token (see `token`). */
  #tokenCount;
  /** @type {number} */
  #heldUntil;
  /** Released: the core forgot it. */
  #done = false;
  /** Lost (renewal refused, or past heldUntil): never renewed again; a release still frees an unchanged record. */
  #lost = false;
  /** @type {Promise<boolean> | undefined} The renewal in flight, and its store calls. */
  #renewal;
  /** @type {Exchange | undefined} */
  #renewing;
  /** @type {AbortController | undefined} `signal`'s, made when it is first read. */
  #controller;
  /** @type {ReturnType<typeof setTimeout> | undefined} The lease end's timer, for `signal`. */
  #timer;

  /**
   * @param {Manager} manager
   * @param {number} ticket
   * @param {string} key the record it holds
   * @param {string} name
   * @param {number} slot
   */
  constructor(manager, ticket, key, name, slot) {
    manager.alive();
    const { core } = manager;
    this.#manager = manager;
    this.#ticket = ticket;
    this.#key = key;
    this.#name = name;
    this.#slot = slot;
    this.#fence = core.lease(ticket);
    this.#tokenCount = core.tokenCount();
    this.#heldUntil = core.heldUntil();
  }

  get name() {
    return this.#name;
  }

  /** Which of its name's `concurrency` slots it holds: 0 … N − 1 (0 for a name taken one at a time). */
  get slot() {
    return this.#slot;
  }

  /** Its isolate's id and a count in 16 hex digits: made only when read. */
  get token() {
    return this.#manager.tokenId() + this.#tokenCount.toString(16).padStart(16, '0');
  }

  get fence() {
    return this.#fence;
  }

  get heldUntil() {
    return this.#heldUntil;
  }

  /** Aborts once this holder has lost the lease; its timer is armed only when first read. */
  get signal() {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#done) this.#controller.abort(lostReason(MESSAGES.lockReleased, this.#name));
      else if (this.#lost) this.#controller.abort(lostReason(MESSAGES.lockLost, this.#name));
      else this.#watch();
    }
    return this.#controller.signal;
  }

  /** The lease end's timer, for the signal (checked again when it fires: a renewal may have moved it). */
  #watch() {
    if (this.#controller === undefined || this.#done || this.#lost) return;
    clearTimeout(this.#timer);
    const manager = this.#manager;
    const left = manager.core.leaseLeft(this.#ticket, manager.time(), performance.now());
    if (!(left > 0)) {
      this.#lose(MESSAGES.lockLapsed);
      return;
    }
    this.#timer = unref(setTimeout(() => this.#watch(), left));
  }

  /** @param {string} template */
  #lose(template) {
    this.#lost = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#controller?.abort(lostReason(template, this.#name));
  }

  /** One CAS moving the lease to `now + staleMs`: true, or false once lost (for good). */
  renew() {
    if (this.#done || this.#lost) return Promise.resolve(false);
    if (this.#renewal === undefined) {
      this.#renewal = this.#renew().finally(() => {
        this.#renewal = undefined;
      });
    }
    return this.#renewal;
  }

  async #renew() {
    const manager = this.#manager;
    let code;
    try {
      manager.alive();
      const now = performance.now();
      const wall = manager.time();
      code = manager.code(manager.core.renew(this.#ticket, wall, now));
      if (code === LOCK_READ || code === LOCK_REPLACE) {
        this.#renewing = new Exchange(manager, this.#key, this.#ticket);
        try {
          code = await this.#renewing.start(code, wall, now);
        } finally {
          this.#renewing = undefined;
        }
      }
      manager.drain();
    } catch (error) {
      throw manager.failed(error);
    }
    if (this.#done) return false; // released meanwhile: the release took over
    if (code === LOCK_HELD) {
      manager.core.lease(this.#ticket);
      this.#heldUntil = manager.core.heldUntil();
      this.#watch();
      return true;
    }
    this.#lose(MESSAGES.lockLost);
    return false;
  }

  /**
   * Renews the lease while its holder works, at the times the core says (`staleMs / 3` apart; a
   * renewal that failed is tried again while the lease has time left), until it is lost — then
   * `lost()` runs — or the returned function stops it. Its timer only guards the lease.
   * @param {() => void} lost
   * @returns {() => void}
   */
  [KEEP_RENEWED](lost) {
    const manager = this.#manager;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    let stopped = false;
    const next = () => {
      if (stopped) return;
      let at;
      try {
        at = this.#done || this.#lost ? Infinity : manager.core.nextRenewal(this.#ticket, manager.time(), performance.now());
      } catch (error) {
        manager.failed(error);
        return;
      }
      if (at === Infinity) {
        lost();
        return;
      }
      try {
        timer = unref(setTimeout(renew, Math.max(0, at - performance.now())));
      } catch {
        // no timer for renewals: the lease runs staleMs, as an unrenewed lock's does
      }
    };
    const renew = () => {
      timer = undefined;
      // Renewed, lost or failed: the core's next answer says what follows.
      this.renew().then(next, next);
    };
    next();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /** Gives the lock back: one store call at most; the core decides what it writes. */
  release() {
    return this[HAND_ON](0);
  }

  /**
   * A serializer's release, announcing `followers` turns after the next waiter's. It never waits
   * behind a renewal in flight: that renewal's answer is ignored, and the core reads the record
   * first (the renewal's outcome is unknown).
   * @param {number} followers
   * @returns {Promise<void>}
   */
  [HAND_ON](followers) {
    if (this.#done) return released;
    this.#done = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#renewing?.abandon(LOCK_DONE);
    const manager = this.#manager;
    let code;
    const now = performance.now();
    const wall = manager.time();
    try {
      manager.alive();
      code = manager.code(manager.core.release(this.#ticket, wall, now, followers));
      manager.drain();
    } catch (error) {
      this.#released();
      return Promise.reject(manager.failed(error));
    }
    if (code !== LOCK_READ && code !== LOCK_REPLACE) {
      this.#released();
      return released;
    }
    const gone = () => this.#released();
    return new Exchange(manager, this.#key, this.#ticket, gone, gone).start(code, wall, now);
  }

  #released() {
    this.#controller?.abort(lostReason(MESSAGES.lockReleased, this.#name));
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await acquireLock(…)` releases at the end of the block.
  Object.defineProperty(KeyturnLock.prototype, Symbol.asyncDispose, {
    /** @this {KeyturnLock} */
    value: function release() {
      return this.release();
    },
    writable: true,
    configurable: true,
  });
}
