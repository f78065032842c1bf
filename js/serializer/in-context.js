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
    this.due = false; // its turn came; it starts a microtask later
    // Its one reaction: to its turn coming, while it waits (on the job before it, then one
    // microtask later); to its own end, once its caller heard (on its own promise). A job's
    // caller hears only once it ran or left the line, so its state tells the two apart.
    this.react = () => (this.state === QUEUED ? scheduler.step(this) : scheduler.jobDone(this));
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
   * A job's reaction, in its caller's context: when its turn has come, it starts a microtask
   * later — deadline timer, controller, work — as the reference's `bounded` then
   * `Promise.resolve().then(work)` do. Until then it still waits (and a caller's abort takes it
   * out of the line).
   */
  step(job) {
    const serializer = this.serializer;
    if (!job.due) {
      // The job it waited for settled: it was the head, so this one is now — unless that one
      // left the line early (its caller's signal), when the core says who is ahead now.
      if (job.prev !== undefined && job.prev.state === CANCELLED) {
        try {
          if (!this.core.isHead(job.ticket)) {
            const ahead = this.core.jobAhead(job.ticket);
            if (ahead !== undefined) {
              job.prev = ahead;
              ahead.tail.then(job.react);
            }
            return;
          }
        } catch (error) {
          serializer.failed(error);
          return;
        }
      }
      job.due = true;
      microtask(job.react);
      return;
    }
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
