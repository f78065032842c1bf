// The direct scheduler (Node, browsers, Deno, bundlers): a job starts two microtasks after its
// turn came — the one before it settled, or with `concurrency` above 1 one of the jobs ahead of
// it — and one timer, armed for the earliest deadline the core orders, bounds every running
// work. Cleared once nothing is queued. A coalescing job's callers need nothing of it: the job
// starts as any (`Callers` as it is).
import { SERIALIZER_NEXT } from '../constants.js';
import { Callers } from './coalescing.js';
import { clear, timerDelay, unref } from '../timers.js';
import { Job, Line, microtask } from './jobs.js';

/** @typedef {import('../serializer.js').Serializer} Serializer */
/** @typedef {import('./jobs.js').Work} Work */
/** @typedef {import('./jobs.js').CallOptions} CallOptions */

/** A busy key, with the one reaction that moves it on after each plain job (no closure per job). */
class DirectLine extends Line {
  /**
   * @param {Serializer} serializer
   * @param {string} key
   * @param {number} id
   * @param {DirectScheduler} scheduler
   */
  constructor(serializer, key, id, scheduler) {
    super(serializer, key, id);
    this.advance = () => scheduler.advance(this);
  }
}

export class DirectScheduler {
  /** The core orders every deadline for one timer. */
  static sharedTimer = true;

  /** @param {Serializer} serializer */
  constructor(serializer) {
    this.serializer = serializer;
    this.core = serializer.core;
    // The shared timer: armed for the earliest deadline (re-armed only for an earlier one).
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    this.armedAt = Infinity;
    this.onTimer = () => this.expire();
    // Lines whose head's turn came: staged a microtask later, started one after that.
    /** @type {DirectLine[]} */
    this.ready = [];
    /** @type {DirectLine[]} */
    this.staged = [];
    this.readyQueued = false;
    this.stage = () => this.stageReady();
    this.startStaged = () => this.startAll();
  }

  /**
   * @param {string} key
   * @param {number} id
   */
  newLine(key, id) {
    return new DirectLine(this.serializer, key, id, this);
  }

  /**
   * @param {Line | undefined} line
   * @param {Work} work
   * @param {CallOptions | undefined} options
   */
  newJob(line, work, options) {
    return new Job(line, work, options);
  }

  /** @param {string} group */
  newCallers(group) {
    return new Callers(group);
  }

  /**
   * An idle key's first job: its turn has come.
   * @param {Line} line
   */
  opened(line) {
    this.schedule(/** @type {DirectLine} */ (line));
  }

  /**
   * A queued job's caller promise: when it settles, the job's line moves on. With
   * `concurrency` above 1, a job that did not open its line (`opened`: that one's turn came
   * with it) may find its turn come at once, with fewer than `concurrency` jobs ahead of it.
   * @param {Job} job
   * @param {Promise<unknown>} result
   * @param {boolean} opened
   */
  entered(job, result, opened) {
    const { parallel } = this.serializer;
    if (!job.cancellable && !parallel) {
      // This reaction also makes a rejection nobody awaits not an unhandled rejection, as in
      // `keyed-serializer.js`, whose tail handles every result; callers that await it still
      // see it.
      const { advance } = /** @type {DirectLine} */ (job.line);
      result.then(advance, advance);
      return;
    }
    const done = () => this.jobDone(job);
    result.then(done, done);
    job.signal?.addEventListener('abort', job);
    if (parallel && !opened && this.core.turnCame(job.ticket)) this.schedule(/** @type {DirectLine} */ (job.line));
  }

  /**
   * A job that may leave its line early, or one of several of its key running at once, settled:
   * its listener goes, and — unless it left the line before it started — its line moves on.
   * @param {Job} job
   */
  jobDone(job) {
    job.signal?.removeEventListener('abort', job);
    if (!this.serializer.parallel) {
      if (job.line.current === job) this.advance(/** @type {DirectLine} */ (job.line));
      return;
    }
    const serializer = this.serializer;
    let change;
    try {
      change = this.core.finishTicket(job.ticket);
    } catch (error) {
      serializer.failed(error);
      return;
    }
    if (change === undefined) return; // it left its line waiting, and was let go then
    serializer.turns.ended(job);
    serializer.left(job);
    this.cancelled(job, change);
  }

  /**
   * A line's head settled: its turn ends, and the next job's comes.
   * @param {DirectLine} line
   */
  advance(line) {
    const serializer = this.serializer;
    const head = line.current;
    if (head !== undefined) {
      line.current = undefined;
      serializer.turns.ended(head);
      serializer.left(head);
    }
    let change;
    try {
      change = this.core.finishHead(line.id);
    } catch (error) {
      serializer.failed(error);
      return;
    }
    if (!serializer.lineChanged(line, change) && change & SERIALIZER_NEXT) this.schedule(line);
  }

  /**
   * A job left its line — a waiting one (its caller's signal), or with `concurrency` above 1 a
   * started one: a next job's turn may have come.
   * @param {Job} job
   * @param {number} change
   */
  cancelled(job, change) {
    const line = /** @type {DirectLine} */ (job.line);
    if (!this.serializer.lineChanged(line, change) && change & SERIALIZER_NEXT) this.schedule(line);
  }

  /** Nothing is queued any more: no timer stays behind (a busy serializer keeps its one). */
  idle() {
    if (this.timer === undefined) return;
    clear(this.timer);
    this.timer = undefined;
    this.armedAt = Infinity;
  }

  // ---- starting ----

  /**
   * A job of the line waits to be started: two microtasks from now.
   * @param {DirectLine} line
   */
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
    const { core } = this;
    for (let i = 0; i < staged.length; i++) {
      let slot;
      let deadline;
      let turnSlot;
      try {
        slot = core.startNext(staged[i].id, now);
        deadline = core.deadline();
        turnSlot = this.serializer.parallel ? core.slot() : 0;
      } catch (error) {
        this.serializer.failed(error);
        break;
      }
      if (slot !== undefined) this.start(this.serializer.job(slot), deadline, now, turnSlot);
    }
    staged.length = 0;
  }

  /**
   * A started job: its deadline on the shared timer, then its work. A job whose deadline
   * cannot be armed does not run; its caller gets the host's error.
   * @param {Job} job
   * @param {number} deadline
   * @param {number} now
   * @param {number} slot the key's slot it runs in
   */
  start(job, deadline, now, slot) {
    job.line.current = job;
    if (deadline < this.armedAt) {
      try {
        this.arm(deadline, now);
      } catch (error) {
        job.reject(error);
        return;
      }
    }
    this.serializer.begin(job, slot);
  }

  // ---- deadlines ----

  /**
   * Arms the shared timer for `deadline` (a new timer first, so a refusal leaves the old one).
   * A pending deadline must not keep a Node process alive, as `keyed-serializer.js`'s unref'd
   * timer does not.
   * @param {number} deadline
   * @param {number} now
   */
  arm(deadline, now) {
    const timer = unref(setTimeout(this.onTimer, timerDelay(deadline - now)));
    const old = this.timer;
    this.timer = timer;
    this.armedAt = deadline;
    if (old !== undefined) clear(old);
  }

  expire() {
    this.timer = undefined;
    this.armedAt = Infinity;
    const serializer = this.serializer;
    const now = performance.now();
    try {
      let slot;
      while ((slot = this.core.expireNext(now)) !== undefined) serializer.timeOut(serializer.job(slot));
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
          serializer.timeOut(serializer.job(earliest), error);
        }
      }
    } catch (error) {
      serializer.failed(error);
    }
  }
}
