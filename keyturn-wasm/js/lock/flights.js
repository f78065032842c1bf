// Store calls in flight, each with a bound: a call not answered by then has failed, its outcome
// unknown (the lock's core reads a write back). Static JS, copied into pkg/ by the build.
//
// A timer per call would cost more than a fast store's call itself, so a manager's calls share
// one timer, armed for the earliest bound and left armed while calls come and go: when it fires
// it times out the calls past their bound and is armed again only if calls are left. It keeps
// a Node or Deno process alive only while a call is in flight (the call is the process's to
// wait for, and it ends within its bound); between calls it is unref'd. On Workers each call
// arms a timer of its own, in its caller's request, and clears it when the call lands: a timer
// belongs to the request that armed it, and another request's may never fire.

/** @typedef {import('./exchange.js').Exchange} Exchange */

/**
 * Deno's timer controls, where the global has them.
 * @typedef {{ refTimer?: (id: number) => void, unrefTimer?: (id: number) => void }} DenoTimers
 */

/**
 * Whether `timer` keeps the process alive (`on`): Node's timers have `ref`/`unref`; Deno's are
 * numbers with `Deno.refTimer`/`Deno.unrefTimer`; elsewhere nothing is kept alive by a timer.
 * @param {ReturnType<typeof setTimeout>} timer
 * @param {boolean} on
 */
function keepAlive(timer, on) {
  if (typeof timer === 'object') {
    const node = /** @type {{ ref?: () => void, unref?: () => void }} */ (timer);
    if (on) node.ref?.();
    else node.unref?.();
    return;
  }
  const deno = /** @type {{ Deno?: DenoTimers }} */ (globalThis).Deno;
  if (on) deno?.refTimer?.(/** @type {number} */ (timer));
  else deno?.unrefTimer?.(/** @type {number} */ (timer));
}

export class Flights {
  /** @param {boolean} ownContext each call arms a timer of its own (Workers) */
  constructor(ownContext) {
    this.ownContext = ownContext;
    // The exchanges with a call in flight under the shared timer, linked through their own
    // `previous`/`following` fields (no allocation per call).
    /** @type {Exchange | undefined} */
    this.first = undefined;
    /** @type {Exchange | undefined} */
    this.last = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    this.timerAt = Infinity;
    this.fire = () => this.expire();
  }

  /**
   * Watches the call `exchange` just made, until its `deadline` (monotonic).
   * @param {Exchange} exchange
   */
  watch(exchange) {
    if (this.ownContext) {
      try {
        exchange.timer = setTimeout(() => this.timedOut(exchange), exchange.ms);
        return;
      } catch {
        // over the request's quota of timers: the shared timer serves
      }
    }
    exchange.previous = this.last;
    exchange.following = undefined;
    if (this.last === undefined) {
      this.first = exchange;
      if (this.timer !== undefined) keepAlive(this.timer, true);
    } else {
      this.last.following = exchange;
    }
    this.last = exchange;
    if (exchange.deadline < this.timerAt) this.arm(exchange.deadline);
  }

  /**
   * `exchange`'s call landed (or it gave up on it): whether it was still being watched.
   * @param {Exchange} exchange
   */
  landed(exchange) {
    if (exchange.timer !== undefined) {
      clearTimeout(exchange.timer);
      exchange.timer = undefined;
      return true;
    }
    if (exchange.previous === undefined && this.first !== exchange) return false;
    if (exchange.previous === undefined) this.first = exchange.following;
    else exchange.previous.following = exchange.following;
    if (exchange.following === undefined) this.last = exchange.previous;
    else exchange.following.previous = exchange.previous;
    exchange.previous = undefined;
    exchange.following = undefined;
    if (this.first === undefined && this.timer !== undefined) keepAlive(this.timer, false);
    return true;
  }

  /** @param {Exchange} exchange */
  timedOut(exchange) {
    if (this.landed(exchange)) exchange.timedOut();
  }

  /**
   * The shared timer, due at `deadline`: armed anew only for an earlier one.
   * @param {number} deadline
   */
  arm(deadline) {
    let timer;
    try {
      timer = setTimeout(this.fire, Math.max(0, deadline - performance.now()));
    } catch {
      return; // refused (workerd's quota): the calls go unbounded until the next one arms it
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = timer;
    this.timerAt = deadline;
  }

  /** The shared timer fired: the calls past their bound time out; it is armed for the rest. */
  expire() {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = performance.now();
    const due = [];
    let next = Infinity;
    for (let exchange = this.first; exchange !== undefined; exchange = exchange.following) {
      if (exchange.deadline <= now) due.push(exchange);
      else next = Math.min(next, exchange.deadline);
    }
    for (const exchange of due) this.timedOut(exchange);
    if (next !== Infinity && next < this.timerAt) this.arm(next);
  }
}
