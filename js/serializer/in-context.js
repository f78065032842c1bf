// The in-context scheduler (Cloudflare Workers): each request runs in an I/O context of its own,
// and I/O or a timer started from another request's context is cancelled when that request
// ends. So every job starts from a promise reaction its own caller registered — on the promise
// of the job queued before it, as the reference's `previous.then(…)` does — and has a deadline
// timer of its own, armed in its own context and cleared when it settles: a request never holds
// more timers than its works running.
import { SERIALIZER_IDLE } from '../constants.js';
import { DONE, CANCELLED, QUEUED, RUNNING, Job, Line, clear, microtask } from './jobs.js';

/** A job that starts from its own reactions. */
class InContextJob extends Job {
  constructor(line, work, options, scheduler) {
    super(line, work, options);
    this.timer = undefined; // its own deadline timer
    this.prev = undefined; // the job queued right before it
    this.tail = undefined; // settles a reaction after its caller's promise
    this.starter = undefined; // once its turn came: the reaction that starts it a microtask later
    // Its one reaction: to its turn coming, while it waits (on the job before it, then one
    // microtask later); to its own end, once its caller heard (on its own promise). A job's
    // caller hears only once it ran or left the line, so its state tells the two apart. A
    // coalescing job's is its first caller's; those that joined have their own (`joined`).
    // workerd runs reactions of different requests in no set order: a coalescing job's first
    // caller may hear of its turn only after a joined caller started it, and that is not its end.
    this.react = () => {
      if (this.state === QUEUED) scheduler.step(this, this.react, this.options?.callers?.first);
      else if (this.state !== DONE && this.options?.callers?.settled !== false) scheduler.jobDone(this);
    };
  }
}

/** A busy key, and its last job (the next one's `prev`). */
class InContextLine extends Line {
  constructor(serializer, key, id) {
    super(serializer, key, id);
    this.last = undefined;
  }
}

export class InContextScheduler {
  /** The core keeps no deadline order: each job has its own timer. */
  static sharedTimer = false;

  constructor(serializer) {
    this.serializer = serializer;
    this.core = serializer.core;
  }

  newLine(key, id) {
    return new InContextLine(this.serializer, key, id);
  }

  newJob(line, work, options) {
    return new InContextJob(line, work, options, this);
  }

  opened() {}

  /**
   * A queued job waits for the one before it, on that job's `tail`: a reaction of its own,
   * settled one microtask after the caller's promise, as the reference's tail is — so it starts
   * after that caller's handlers ran.
   */
  entered(job, result) {
    const line = job.line;
    job.prev = line.last;
    line.last = job;
    job.tail = result.then(job.react, job.react);
    if (job.prev === undefined) microtask(job.react);
    else job.prev.tail.then(job.react);
    job.signal?.addEventListener('abort', job);
  }

  /**
   * A coalescing call joined a waiting job: it reacts to the job's turn too, so that a job
   * whose first caller left still starts from a reaction of a caller that waits.
   */
  joined(caller) {
    const job = caller.job;
    caller.react = () => {
      if (job.state === QUEUED) this.step(job, caller.react, caller);
    };
    if (job.prev === undefined) microtask(caller.react);
    else job.prev.tail.then(caller.react);
  }

  /**
   * A coalescing job's caller waits. Its job may run in another caller's request, and a
   * request whose only wait is a promise another request settles has no event pending in its
   * own context: workerd cancels it as hung, and with it every reaction it registered (the
   * job's end, if it was the first caller). A timer of its own, re-armed while it waits and
   * cleared when it settles or leaves, is an event workerd sees.
   */
  waiting(caller) {
    this.keepAlive(caller);
  }

  /**
   * Whether a coalescing job's caller whose signal aborted, with other callers still waiting,
   * rejects at once. Not the caller that queued the job: the job's own promise and the
   * reactions that move its key on belong to that caller's request, and workerd cancels a
   * request's reactions once it has answered. So that caller's promise rejects with its reason
   * when the work ends; its request stays until then, and so does the key's line.
   */
  leavesAtOnce(caller) {
    return caller !== caller.job.options.callers.first;
  }

  /** Arms (or re-arms) a caller's keep-alive timer, for the length of its job's deadline. */
  keepAlive(caller) {
    const { job } = caller;
    try {
      caller.timer = setTimeout(() => {
        if (!caller.settled) this.keepAlive(caller);
      }, Math.max(1, Math.ceil(job.timeoutMs)));
      caller.timer?.unref?.();
    } catch {
      // past a platform's timer quota: the caller waits all the same, unguarded against the check
      caller.timer = undefined;
    }
  }

  /**
   * A job's reaction (`reaction`, of its `caller` when it coalesces), in that caller's context:
   * when its turn has come, it starts a microtask later — deadline timer, controller, work —
   * as the reference's `bounded` then `Promise.resolve().then(work)` do. Until then it still
   * waits (and a caller's abort takes it out of the line). Of a shared job's callers, the first
   * still waiting whose reaction finds its turn come starts it.
   */
  step(job, reaction, caller) {
    const serializer = this.serializer;
    if (job.starter === undefined) {
      if (caller !== undefined && caller.left) return;
      // The job it waited for settled: it was the head, so this one is now — unless that one
      // left the line early (its caller's signal), or this reaction is a joined caller's, which
      // waited on whatever was ahead when it joined: then the core says who is ahead now.
      if (reaction !== job.react || (job.prev !== undefined && job.prev.state === CANCELLED)) {
        try {
          if (!this.core.isHead(job.ticket)) {
            const ahead = this.core.jobAhead(job.ticket);
            if (ahead !== undefined) {
              job.prev = ahead;
              ahead.tail.then(reaction);
            }
            return;
          }
        } catch (error) {
          serializer.failed(error);
          return;
        }
      }
      job.starter = reaction;
      microtask(reaction);
      return;
    }
    // Its starter left in the one microtask since: it starts from that context all the same.
    if (job.starter !== reaction) return;
    let started;
    try {
      // No time: with a timer per work the core orders no deadlines (and workerd's
      // performance.now() costs as much as a fifth of a timer).
      started = this.core.startTicket(job.ticket);
    } catch (error) {
      serializer.failed(error);
      return;
    }
    if (!started) return;
    try {
      // A closure rather than `setTimeout(f, ms, job)`: workerd takes nearly twice as long to
      // arm and clear a timer given an argument to pass.
      job.timer = setTimeout(() => this.expire(job), Math.max(1, Math.ceil(job.timeoutMs)));
      // A deadline must not keep a Node process alive (as the reference's unref'd timer does not).
      job.timer?.unref?.();
    } catch (error) {
      serializer.unarmed(job, error);
      return;
    }
    serializer.begin(job);
  }

  expire(job) {
    job.timer = undefined;
    if (job.state === RUNNING) this.serializer.timeOutNow(job);
  }

  /** A job's caller promise settled: its timer and listener go, and its line moves on. */
  jobDone(job) {
    const serializer = this.serializer;
    if (job.timer !== undefined) {
      clear(job.timer);
      job.timer = undefined;
    }
    job.signal?.removeEventListener('abort', job);
    // A job that left its line early hears of its end, and perhaps of its turn after it.
    if (job.state === CANCELLED) return;
    job.state = DONE;
    serializer.turns.ended(job);
    let change;
    try {
      change = this.core.finishTicket(job.ticket);
    } catch (error) {
      serializer.failed(error);
      return;
    }
    // The next job starts from its own reaction on this job's tail.
    if (change & SERIALIZER_IDLE) serializer.lineChanged(job.line, change);
  }

  /** A waiting job left its line (its caller's signal); the one behind finds who is ahead. */
  cancelled(job, change) {
    this.serializer.lineChanged(job.line, change);
  }

  idle() {}
}
