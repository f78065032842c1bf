// A serializer's turns over a store: each started job first takes its key's lease — the lock
// named SERIALIZE_PREFIX + key, through the lock manager of that store — then runs its work with
// the lease's fence, the lease renewed while it runs. The rules are the crate's `Turns` machine
// (src/serializer/turns.rs, in the serializer's wasm module), which the Rust `StoreSerializer` drives
// too: hand the lease the turn before left to this turn's acquisition, release it before the
// caller hears when nothing of the key is queued behind, keep it for the next turn otherwise,
// and free it once the key is idle.
import { MESSAGES, SERIALIZE_PREFIX, TURN_RELEASE, TURN_RELEASE_FIRST, TURN_RUN, TURN_TIME_OUT, fill } from '../constants.js';
import { TurnsBinding } from '../keyturn_wasm.js';
import { leaseOptionError } from '../arguments.js';
import { HAND_ON, KEEP_RENEWED } from '../lock/held.js';
import { runWork, watchLate } from './jobs.js';

const ignore = () => {};

/** The reason a work's signal aborts with when its lease was lost while it ran. */
const lostLease = (key) => new DOMException(`keyturn: ${fill(MESSAGES.turnLeaseLost, { key })}`, 'AbortError');

/** The lease a running turn holds, and how to stop its renewals. */
class HeldTurn {
  constructor(lock, stopRenewals) {
    this.lock = lock;
    this.stopRenewals = stopRenewals;
  }
}

export class LeasedTurns {
  /** `lease`: the turns' lease options (see `leaseOptions`). Throws a RangeError for a bad one. */
  constructor(serializer, manager, lease) {
    const { staleMs, maxClockSkewMs, storeTimeoutMs } = lease;
    const refused = TurnsBinding.checkLease(staleMs, maxClockSkewMs, storeTimeoutMs);
    if (refused !== 0) throw leaseOptionError(refused, lease);
    this.serializer = serializer;
    this.manager = manager;
    this.lease = lease;
    this.machine = new TurnsBinding(staleMs);
    this.held = new Map(); // job → HeldTurn, while its work runs
  }

  /**
   * Takes the key's lease for a started job, then calls its work with the lease's fence. The
   * wait is bounded by the job's deadline (its controller aborts the acquisition at timeout or
   * the caller's abort, leaving nothing held).
   */
  start(job) {
    const { serializer, manager } = this;
    const { key, id } = job.line;
    let handOn;
    let followers;
    let streakMs;
    try {
      handOn = this.machine.begin(id, serializer.core.pendingIn(id));
      followers = this.machine.followers();
      streakMs = this.machine.streakMs();
    } catch (error) {
      job.reject(serializer.failed(error));
      return;
    }
    const signal = job.controller.signal;
    manager.acquire(SERIALIZE_PREFIX + key, { ...this.lease, waitMs: job.timeoutMs }, signal, streakMs).then(
      (lock) => this.acquired(job, lock),
      (error) => {
        // Aborted: the deadline or the caller's signal told the caller already.
        if (!signal.aborted) job.reject(error);
      },
    );
    // Released once this acquisition is in line, so the core hands it over without a store call.
    handOn?.[HAND_ON](followers).catch(ignore);
  }

  acquired(job, lock) {
    let code;
    try {
      code = TurnsBinding.acquired(lock !== undefined, job.controller.signal.aborted);
    } catch (error) {
      job.reject(this.serializer.failed(error));
      return;
    }
    if (code === TURN_RUN) {
      const stop = lock[KEEP_RENEWED](() => job.controller?.abort(lostLease(job.line.key)));
      this.held.set(job, new HeldTurn(lock, stop));
      try {
        this.serializer.core.called(job.line.id);
      } catch (error) {
        this.serializer.failed(error);
      }
      this.call(job, lock);
    } else if (code === TURN_RELEASE) {
      lock[HAND_ON](0).catch(ignore);
    } else if (code === TURN_TIME_OUT) {
      // The wait ended on the lock's clock before the deadline's timer fired: the same end.
      this.serializer.timeOutNow(job);
    }
  }

  /** The work, with the lease's fence; its caller hears once a last turn's lease is freed. */
  call(job, lock) {
    const run = runWork(job, { fence: lock.fence });
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
   */
  settled(job, settle) {
    const turn = this.held.get(job);
    let code;
    try {
      const pending = this.serializer.core.pendingIn(job.line.id);
      code = TurnsBinding.settled(pending, job.controller.signal.aborted);
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

  /** A turn ended (its caller heard) still holding its lease: kept for the key's next turn. */
  ended(job) {
    const turn = this.held.get(job);
    if (turn === undefined) return;
    this.held.delete(job);
    turn.stopRenewals();
    let displaced;
    try {
      displaced = this.machine.ended(job.line.id, turn.lock);
    } catch (error) {
      this.serializer.failed(error);
      return;
    }
    displaced?.[HAND_ON](0).catch(ignore);
  }

  /** The key went idle here: the lease left is freed for the other isolates. */
  idle(line) {
    let left;
    try {
      left = this.machine.idle(line.id);
    } catch (error) {
      this.serializer.failed(error);
      return;
    }
    left?.[HAND_ON](0).catch(ignore);
  }
}
