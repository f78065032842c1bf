// A serializer's turns over a store: each started job first takes its key's lease — the lock
// named SERIALIZE_PREFIX + key (one of its slots, at `concurrency` N), through the lock manager
// of that store — then runs its work with the lease's fence, the lease renewed while it runs.
// The rules are the crate's `Turns` machine, which the serializer's core keeps beside its lines
// and which the Rust `StoreSerializer` drives too: the acquisition's wait and streak, the lease
// the turn before left (handed to this turn's acquisition once it is in line), a lease released
// before the caller hears when no work of the key waits to start, kept for the next turn
// otherwise, and freed once the key is idle.
import { MESSAGES, SERIALIZE_PREFIX, TURN_RELEASE, TURN_RELEASE_FIRST, TURN_RUN, TURN_TIME_OUT, fill } from '../constants.js';
import { HAND_ON, KEEP_RENEWED } from '../lock/held.js';
import { acquireSlot } from '../lock/slots.js';
import { runWork, watchLate } from './jobs.js';

/** @typedef {import('../serializer.js').Serializer} Serializer */
/** @typedef {import('./jobs.js').Job} Job */
/** @typedef {import('./jobs.js').Line} Line */
/** @typedef {import('../lock/manager.js').Manager} Manager */
/** @typedef {import('../lock/held.js').KeyturnLock} KeyturnLock */
/** @typedef {import('../arguments.js').LeaseOptions} LeaseOptions */

const ignore = () => {};

/**
 * The reason a work's signal aborts with when its lease was lost while it ran.
 * @param {string} key
 */
const lostLease = (key) => new DOMException(`keyturn: ${fill(MESSAGES.turnLeaseLost, { key })}`, 'AbortError');

/** The lease a running turn holds, and how to stop its renewals. */
class HeldTurn {
  /**
   * @param {KeyturnLock} lock
   * @param {() => void} stopRenewals
   */
  constructor(lock, stopRenewals) {
    this.lock = lock;
    this.stopRenewals = stopRenewals;
  }
}

export class LeasedTurns {
  /**
   * @param {Serializer} serializer
   * @param {Manager} manager the store's lock manager
   * @param {LeaseOptions} lease the lease options the caller gave (the core checked them)
   */
  constructor(serializer, manager, lease) {
    this.serializer = serializer;
    this.manager = manager;
    this.lease = lease;
    /** @type {Map<Job, HeldTurn>} while its work runs */
    this.held = new Map();
  }

  /**
   * Takes the key's lease for a started job, then calls its work with the lease's fence. The
   * wait ends with the job's deadline (its controller aborts the acquisition at timeout or the
   * caller's abort, leaving nothing held).
   * @param {Job} job
   */
  start(job) {
    const { serializer, manager } = this;
    const { core } = serializer;
    /** @type {KeyturnLock | undefined} */
    let handOn;
    let followers;
    let waitMs;
    let streakMs;
    try {
      handOn = core.beginTurn(job.ticket);
      followers = core.turnFollowers();
      waitMs = core.turnWaitMs();
      streakMs = core.turnStreakMs();
    } catch (error) {
      job.reject(serializer.failed(error));
      return;
    }
    const signal = /** @type {AbortController} */ (job.controller).signal;
    const { staleMs, maxClockSkewMs, storeTimeoutMs, concurrency } = this.lease;
    // Not a spread of the options: a literal of one shape keeps the acquisition's path fast.
    const options = { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, concurrency };
    const name = SERIALIZE_PREFIX + job.line.key;
    // N at a time: the slot the turn before left is handed on as one name's lease is; with
    // none left, any slot.
    const acquisition =
      concurrency === undefined || concurrency === 1
        ? manager.acquire(name, options, signal, streakMs)
        : handOn !== undefined
          ? manager.acquire(name, options, signal, streakMs, handOn.slot)
          : acquireSlot(manager, name, options, signal, streakMs);
    acquisition.then(
      (lock) => this.acquired(job, lock),
      (error) => {
        // Aborted: the deadline or the caller's signal told the caller already.
        if (!signal.aborted) job.reject(error);
      },
    );
    // Released once this acquisition is in line, so the core hands it over without a store call.
    handOn?.[HAND_ON](followers).catch(ignore);
  }

  /**
   * @param {Job} job
   * @param {KeyturnLock | undefined} lock
   */
  acquired(job, lock) {
    const { serializer } = this;
    let code;
    try {
      code = serializer.core.turnAcquired(job.ticket, lock !== undefined);
    } catch (error) {
      job.reject(serializer.failed(error));
      return;
    }
    if (code === TURN_RUN && lock !== undefined) {
      const stop = lock[KEEP_RENEWED](() => job.controller?.abort(lostLease(job.line.key)));
      this.held.set(job, new HeldTurn(lock, stop));
      try {
        serializer.core.called(job.ticket);
      } catch (error) {
        serializer.failed(error);
      }
      this.call(job, lock);
    } else if (code === TURN_RELEASE) {
      lock?.[HAND_ON](0).catch(ignore);
    } else if (code === TURN_TIME_OUT) {
      // The wait ended on the lock's clock before the deadline's timer fired: the same end.
      serializer.timeOutNow(job);
    }
  }

  /**
   * The work, with the lease's fence; its caller hears once a last turn's lease is freed.
   * @param {Job} job
   * @param {KeyturnLock} lock
   */
  call(job, lock) {
    // The slot of the key's lease: unique among the key's turns running anywhere.
    const run = runWork(job, { fence: lock.fence, slot: lock.slot });
    run.then(
      (value) => this.settled(job, () => job.resolve(value)),
      (error) => this.settled(job, () => job.reject(error)),
    );
    if (job.options?.onLateSettle !== undefined) watchLate(job, run);
  }

  /**
   * A turn's work settled: with nothing of its key queued behind it here, its lease is freed
   * before its caller hears — so a handler that answers as soon as its work settled leaves
   * nothing held (on Workers, I/O in flight when a request ends may be cancelled). Otherwise
   * the next turn takes the lease over, with no store call.
   * @param {Job} job
   * @param {() => void} settle
   */
  settled(job, settle) {
    const turn = this.held.get(job);
    let code;
    try {
      code = this.serializer.core.turnSettled(job.ticket);
    } catch (error) {
      this.serializer.failed(error);
    }
    if (turn === undefined || code !== TURN_RELEASE_FIRST) {
      settle();
      return;
    }
    this.held.delete(job);
    turn.stopRenewals();
    turn.lock[HAND_ON](0).then(settle, settle);
  }

  /**
   * A turn ended (its caller heard) still holding its lease: kept for the key's next turn.
   * @param {Job} job
   */
  ended(job) {
    const turn = this.held.get(job);
    if (turn === undefined) return;
    this.held.delete(job);
    turn.stopRenewals();
    /** @type {KeyturnLock | undefined} */
    let displaced;
    try {
      displaced = this.serializer.core.turnEnded(job.line.id, turn.lock);
    } catch (error) {
      this.serializer.failed(error);
      return;
    }
    displaced?.[HAND_ON](0).catch(ignore);
  }

  /**
   * The key went idle here: the lease left is freed for the other isolates.
   * @param {Line} line
   */
  idle(line) {
    /** @type {KeyturnLock | undefined} */
    let left;
    try {
      left = this.serializer.core.turnIdle(line.id);
    } catch (error) {
      this.serializer.failed(error);
      return;
    }
    left?.[HAND_ON](0).catch(ignore);
  }
}
