// The in-context scheduler (Cloudflare Workers): each request runs in an I/O context of its own,
// and I/O or a timer started from another request's context is cancelled when that request
// ends. So every job starts from a promise reaction its own caller registered — on the promise
// of the job queued before it, as `keyed-serializer.js`'s `previous.then(…)` does — and has a
// deadline timer of its own, armed in its own context and cleared when it settles: a request
// never holds more timers than its works running. With `concurrency` above 1 a job's turn
// comes when any job ahead of it ends: the next job to start reacts to the ends of the running
// ones, and the job behind it to its start (`Started`). A job never waits on a promise of its
// own request — workerd would cancel that request as hung — only on other requests' promises.
// Whether a job's turn came, whether it starts and whether it has anything to finish is the
// core's to say; `InContextCallers` is what coalescing needs here.
import { SERIALIZER_IDLE } from '../constants.js';
import { Callers } from './coalescing.js';
import { clear, timerDelay, unref } from '../timers.js';
import { Job, Line, microtask } from './jobs.js';

/** @typedef {import('../serializer.js').Serializer} Serializer */
/** @typedef {import('./jobs.js').Work} Work */
/** @typedef {import('./jobs.js').CallOptions} CallOptions */
/** @typedef {import('./coalescing.js').Caller} Caller */
/** @typedef {(value?: unknown) => boolean | undefined} Reaction see `InContextScheduler.reacted` */

/**
 * With `concurrency` above 1, what the job behind a job reacts to: settled when that job
 * started or left its line waiting. Made in that job's own request, at its entry.
 */
class Started {
  constructor() {
    /** @type {() => void} */
    this.settle = () => {};
    /** @type {Promise<void>} */
    this.promise = new Promise((resolve) => {
      this.settle = resolve;
    });
  }
}

/** A job that starts from its own reactions. */
class InContextJob extends Job {
  /**
   * @param {Line | undefined} line
   * @param {Work} work
   * @param {CallOptions | undefined} options
   * @param {InContextScheduler} scheduler
   */
  constructor(line, work, options, scheduler) {
    super(line, work, options);
    /** @type {ReturnType<typeof setTimeout> | undefined} its own deadline timer */
    this.timer = undefined;
    /** @type {InContextJob | undefined} the job queued right before it */
    this.prev = undefined;
    /** @type {Promise<unknown>} settles a reaction after its caller's promise: with `true` when it ran and its line moved on */
    this.tail = headNow;
    /** @type {Started | undefined} with `concurrency` above 1 */
    this.started = undefined;
    /**
     * @type {Reaction | null | undefined} once its turn came, the reaction that starts it a
     * microtask later; `null` once that one ran
     */
    this.starter = undefined;
    // Its one reaction: to its turn coming, while it waits (on the job before it, then one
    // microtask later); to its own end, once its caller heard (on its own promise). One closure
    // for the two, not one each: a queued job's every field is memory each scavenge copies.
    // A coalescing job's is its first caller's; those that joined have their own
    // (`InContextCallers.follow`).
    /** @type {Reaction} */
    this.react = (value) => scheduler.reacted(this, this.react, this.options?.callers?.first, value);
  }
}

/** What a key's first job reacts to: none is ahead. */
const headNow = Promise.resolve(true);

/** A busy key, and its last job (the next one's `prev`). */
class InContextLine extends Line {
  /**
   * @param {Serializer} serializer
   * @param {string} key
   * @param {number} id
   */
  constructor(serializer, key, id) {
    super(serializer, key, id);
    /** @type {InContextJob | undefined} */
    this.last = undefined;
    /** @type {Set<InContextJob> | undefined} with `concurrency` above 1, its started jobs still in line */
    this.started = undefined;
  }
}

/**
 * A coalescing job's callers on Workers: each reacts to the job's turn, so that a job whose
 * first caller left still starts from a reaction of a caller that waits; each holds a
 * keep-alive timer while it waits; and the caller that queued the job hears its signal's
 * reason when the work ends, not at once.
 */
class InContextCallers extends Callers {
  /**
   * @param {string} group
   * @param {InContextScheduler} scheduler
   */
  constructor(group, scheduler) {
    super(group);
    this.scheduler = scheduler;
  }

  /**
   * A caller that joined a waiting job reacts to the job's turn too, from its own request.
   * @override
   * @param {Caller} caller
   */
  follow(caller) {
    const job = /** @type {InContextJob} */ (caller.job);
    /** @type {Reaction} */
    const react = (value) => this.scheduler.reacted(job, react, caller, value);
    caller.react = react;
    (job.prev?.tail ?? headNow).then(react); // with `concurrency` above 1, `prev` is none
  }

  /**
   * A caller waits. Its job may run in another caller's request, and a request whose only wait
   * is a promise another request settles has no event pending in its own context: workerd
   * cancels it as hung, and with it every reaction it registered (the job's end, if it was the
   * first caller). A timer of its own, re-armed while it waits and cleared when it settles or
   * leaves, is an event workerd sees.
   * @override
   * @param {Caller} caller
   */
  waiting(caller) {
    this.keepAlive(caller);
  }

  /**
   * Not the caller that queued the job: the job's own promise and the reactions that move its
   * key on belong to that caller's request, and workerd cancels a request's reactions once it
   * has answered. So that caller's promise rejects with its reason when the work ends; its
   * request stays until then, and so does the key's line.
   * @override
   * @param {Caller} caller
   */
  leavesAtOnce(caller) {
    return caller !== this.first;
  }

  /**
   * Arms (or re-arms) a caller's keep-alive timer, for the length of its job's deadline.
   * @param {Caller} caller
   */
  keepAlive(caller) {
    const { job } = caller;
    let timeoutMs;
    try {
      timeoutMs = this.scheduler.core.timeoutOf(job.ticket);
    } catch (error) {
      job.line.serializer.failed(error);
      return;
    }
    if (timeoutMs === undefined) return; // its job is gone: the caller has heard, or hears now
    try {
      caller.timer = unref(
        setTimeout(() => {
          if (!caller.settled) this.keepAlive(caller);
        }, timerDelay(timeoutMs)),
      );
    } catch {
      // past a platform's timer quota: the caller waits all the same, unguarded against the check
      caller.timer = undefined;
    }
  }
}

export class InContextScheduler {
  /** The core keeps no deadline order: each job has its own timer. */
  static sharedTimer = false;

  /** @param {Serializer} serializer */
  constructor(serializer) {
    this.serializer = serializer;
    this.core = serializer.core;
  }

  /**
   * @param {string} key
   * @param {number} id
   */
  newLine(key, id) {
    return new InContextLine(this.serializer, key, id);
  }

  /**
   * @param {Line | undefined} line
   * @param {Work} work
   * @param {CallOptions | undefined} options
   */
  newJob(line, work, options) {
    return new InContextJob(line, work, options, this);
  }

  /** @param {string} group */
  newCallers(group) {
    return new InContextCallers(group, this);
  }

  opened() {}

  /**
   * A queued job waits for the one before it, on that job's `tail`: a reaction of its own,
   * settled one microtask after the caller's promise, as `keyed-serializer.js`'s tail is — so
   * it starts after that caller's handlers ran. The first job of a key reacts a microtask
   * later.
   * @param {Job} queued
   * @param {Promise<unknown>} result
   */
  entered(queued, result) {
    const job = /** @type {InContextJob} */ (queued);
    const line = /** @type {InContextLine} */ (job.line);
    job.tail = result.then(job.react, job.react);
    if (this.serializer.parallel) {
      // It looks at its turn a microtask from now, and waits from there if it must.
      job.started = new Started();
      line.started ??= new Set();
      headNow.then(job.react);
    } else {
      job.prev = line.last;
      line.last = job;
      (job.prev?.tail ?? headNow).then(job.react);
    }
    job.signal?.addEventListener('abort', job);
  }

  /**
   * With `concurrency` above 1, a job that may not start yet waits, from its caller's request:
   * while the job ahead of it has not started, for that one's start; else for the end of any
   * job of its key that runs. Then it looks again.
   * @param {InContextJob} job
   * @param {Reaction} reaction
   */
  waitForSlot(job, reaction) {
    const serializer = this.serializer;
    let ahead;
    try {
      if (!this.core.waits(job.ticket)) return; // it left its line, or started
      ahead = this.core.jobAhead(job.ticket);
      ahead = ahead === undefined ? undefined : /** @type {InContextJob} */ (serializer.job(ahead));
      if (ahead !== undefined && !this.core.waits(ahead.ticket)) ahead = undefined;
    } catch (error) {
      serializer.failed(error);
      return;
    }
    const again = () => {
      if (job.starter === undefined) reaction(undefined);
    };
    if (ahead !== undefined) {
      ahead.started?.promise.then(again);
      return;
    }
    const line = /** @type {InContextLine} */ (job.line);
    for (const running of line.started ?? []) running.tail.then(again);
  }

  /**
   * A reaction of `job` (`reaction`, of its `caller` when it coalesces), in that caller's
   * context, to `value`: what the tail it waited on settled with, or its own outcome. Until
   * the job started, it is to its turn (`turn`); after, its own reaction is its end. workerd
   * runs reactions of different requests in no set order: a coalescing job's first caller may
   * hear of its turn only after a joined caller started it, and that is not its end.
   *
   * Answers what its tail settles with when this reaction is its end (see `jobDone`).
   * @param {InContextJob} job
   * @param {Reaction} reaction
   * @param {Caller | undefined} caller
   * @param {unknown} value
   * @returns {boolean | undefined}
   */
  reacted(job, reaction, caller, value) {
    if (job.starter !== null) this.turn(job, reaction, caller, value);
    else if (reaction === job.react && job.options?.callers?.settled !== false) return this.jobDone(job);
    return undefined;
  }

  /**
   * A waiting job's reaction to the tail of the job ahead (`value`): when its turn has come, it
   * starts a microtask later — deadline timer, controller, work — as `keyed-serializer.js`'s
   * `bounded` then `Promise.resolve().then(work)` do. Until then it still waits (and a caller's
   * abort takes it out of the line). Of a shared job's callers, the first still waiting whose
   * reaction finds its turn come starts it.
   * @param {InContextJob} job
   * @param {Reaction} reaction
   * @param {Caller | undefined} caller
   * @param {unknown} value
   */
  turn(job, reaction, caller, value) {
    const serializer = this.serializer;
    if (serializer.instance.failure !== undefined) return; // its waiting jobs were told already
    if (job.starter === undefined) {
      if (caller !== undefined && caller.left) return;
      if (serializer.parallel) {
        // With `concurrency` above 1 the core says whether it may start now; else it waits.
        let now;
        try {
          now = this.core.mayStart(job.ticket);
        } catch (error) {
          serializer.failed(error);
          return;
        }
        if (!now) {
          this.waitForSlot(job, reaction);
          return;
        }
      } else if (value !== true) {
        // The job it waited for settled. When that one ran (its tail settled with `true`), the
        // core moved the line on and this one is the head; when it left the line early (its
        // caller's signal), or this is a joined caller's first reaction, this one waits on the
        // job the core says is ahead now, if any. (A job that left its line itself hears its
        // own outcome here first: `startTicket` then says it does not start.)
        let slot;
        try {
          slot = this.core.jobAhead(job.ticket);
        } catch (error) {
          serializer.failed(error);
          return;
        }
        if (slot !== undefined) {
          const ahead = /** @type {InContextJob} */ (serializer.job(slot));
          job.prev = ahead;
          ahead.tail.then(reaction);
          return;
        }
      }
      job.starter = reaction;
      microtask(reaction);
      return;
    }
    // Its starter left in the one microtask since: it starts from that context all the same.
    if (job.starter !== reaction) return;
    job.starter = null;
    let timeoutMs;
    try {
      // No time: with a timer per work the core orders no deadlines (and workerd's
      // performance.now() costs as much as a fifth of a timer).
      timeoutMs = this.core.startTicket(job.ticket);
    } catch (error) {
      serializer.failed(error);
      return;
    }
    if (timeoutMs === undefined) return;
    let slot = 0;
    if (serializer.parallel) {
      try {
        slot = this.core.slot();
      } catch (error) {
        serializer.failed(error);
        return;
      }
      /** @type {Set<InContextJob>} */ (/** @type {InContextLine} */ (job.line).started).add(job);
      job.started?.settle();
    }
    try {
      // A closure rather than `setTimeout(f, ms, job)`: workerd takes nearly twice as long to
      // arm and clear a timer given an argument to pass. A deadline must not keep a Node
      // process alive, as `keyed-serializer.js`'s unref'd timer does not.
      job.timer = unref(setTimeout(() => this.expire(job), timerDelay(timeoutMs)));
    } catch (error) {
      // A job whose deadline cannot be armed does not run; its caller gets the host's error.
      job.reject(error);
      return;
    }
    serializer.begin(job, slot);
  }

  /** @param {InContextJob} job */
  expire(job) {
    job.timer = undefined;
    this.serializer.timeOutNow(job);
  }

  /**
   * A job's caller promise settled: its timer and listener go, and if it started, its line
   * moves on (one that left its line waiting was let go as it left). Answers whether it did,
   * for the job behind, which reacts to this answer.
   * @param {InContextJob} job
   */
  jobDone(job) {
    const serializer = this.serializer;
    this.letGo(job);
    if (serializer.instance.failure !== undefined) return false;
    serializer.turns.ended(job); // a job that never started holds no turn
    let change;
    try {
      change = this.core.finishTicket(job.ticket);
    } catch (error) {
      serializer.failed(error);
      return false;
    }
    if (change === undefined) return false;
    /** @type {InContextLine} */ (job.line).started?.delete(job);
    serializer.left(job);
    // The next job starts from its own reaction on this job's tail.
    if (change & SERIALIZER_IDLE) serializer.lineChanged(job.line, change);
    return true;
  }

  /**
   * A job's timer and listener go.
   * @param {InContextJob} job
   */
  letGo(job) {
    if (job.timer !== undefined) {
      clear(job.timer);
      job.timer = undefined;
    }
    job.signal?.removeEventListener('abort', job);
  }

  /**
   * A waiting job left its line (its caller's signal); the one behind finds who is ahead.
   * @param {Job} job
   * @param {number} change
   */
  cancelled(job, change) {
    /** @type {InContextJob} */ (job).started?.settle();
    this.serializer.lineChanged(job.line, change);
  }

  idle() {}
}
