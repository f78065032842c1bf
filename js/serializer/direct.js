// The direct scheduler (Node, browsers, Deno, bundlers): a job starts when the one before it
// settled, two microtasks later, and one timer — armed for the earliest deadline the core
// orders — bounds every running work. Cleared once nothing is queued.
import { SERIALIZER_NEXT } from '../constants.js';
import { DONE, CANCELLED, Job, Line, clear, microtask } from './jobs.js';

/** A busy key, with the one reaction that moves it on after each plain job (no closure per job). */
class DirectLine extends Line {
  constructor(serializer, key, id, scheduler) {
    super(serializer, key, id);
    this.advance = () => scheduler.advance(this);
  }
}

export class DirectScheduler {
  /** The core orders every deadline for one timer. */
  static sharedTimer = true;

  constructor(serializer) {
    this.serializer = serializer;
    this.core = serializer.core;
    // The shared timer: armed for the earliest deadline (re-armed only for an earlier one).
    this.timer = undefined;
    this.armedAt = Infinity;
    this.onTimer = () => this.expire();
    // Lines whose head's turn came: staged a microtask later, started one after that.
    this.ready = [];
    this.staged = [];
    this.readyQueued = false;
    this.stage = () => this.stageReady();
    this.startStaged = () => this.startAll();
  }

  newLine(key, id) {
    return new DirectLine(this.serializer, key, id, this);
  }

  newJob(line, work, options) {
    return new Job(line, work, options);
  }

  /** An idle key's first job: its turn has come. */
  opened(line) {
    this.schedule(line);
  }

  /** A queued job's caller promise: when it settles, the job's line moves on. */
  entered(job, result) {
    if (!job.cancellable) {
      // This reaction also makes a rejection nobody awaits not an unhandled rejection, as in
      // the reference, whose tail handles every result; callers that await it still see it.
      result.then(job.line.advance, job.line.advance);
      return;
    }
    const done = () => this.jobDone(job);
    result.then(done, done);
    job.signal?.addEventListener('abort', job);
  }

  /** A coalescing call joined a waiting job: nothing to do, the job starts as any. */
  joined() {}

  /** A coalescing job's caller waits: nothing to do. */
  waiting() {}

  /** A coalescing job's caller whose signal aborted rejects at once, whoever else waits. */
  leavesAtOnce() {
    return true;
  }

  /** A job that may leave its line early settled: its listener goes, and its line moves on unless it left. */
  jobDone(job) {
    job.signal?.removeEventListener('abort', job);
    if (job.state === CANCELLED) return;
    job.state = DONE;
    this.advance(job.line);
  }

  /** A line's head settled: its turn ends, and the next job's comes. */
  advance(line) {
    const serializer = this.serializer;
    const head = line.current;
    if (head !== undefined) {
      line.current = undefined;
      serializer.turns.ended(head);
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

  /** A waiting job left its line (its caller's signal). */
  cancelled(job, change) {
    if (!this.serializer.lineChanged(job.line, change) && change & SERIALIZER_NEXT) this.schedule(job.line);
  }

  /** Nothing is queued any more: no timer stays behind (a busy serializer keeps its one). */
  idle() {
    if (this.timer === undefined) return;
    clear(this.timer);
    this.timer = undefined;
    this.armedAt = Infinity;
  }

  // ---- starting ----

  /** A line's head waits to be started: two microtasks from now. */
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
    for (let i = 0; i < staged.length; i++) {
      let job;
      try {
        job = this.core.startHead(staged[i].id, now);
      } catch (error) {
        this.serializer.failed(error);
        break;
      }
      if (job !== undefined) this.start(job, now);
    }
    staged.length = 0;
  }

  /** A started job: its deadline on the shared timer, then its work. */
  start(job, now) {
    job.line.current = job;
    const deadline = now + job.timeoutMs;
    if (deadline < this.armedAt) {
      try {
        this.arm(deadline, now);
      } catch (error) {
        this.serializer.unarmed(job, error);
        return;
      }
    }
    this.serializer.begin(job);
  }

  // ---- deadlines ----

  /** Arms the shared timer for `deadline` (a new timer first, so a refusal leaves the old one). */
  arm(deadline, now) {
    const timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(deadline - now)));
    // Node answers a Timeout object: a pending deadline must not keep a process alive (as the
    // reference's unref'd timer does not). Browsers and Workers answer a number.
    timer?.unref?.();
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
      let job;
      while ((job = this.core.expireNext(now)) !== undefined) serializer.timeOut(job, undefined);
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
          serializer.timeOut(earliest, error);
        }
      }
    } catch (error) {
      serializer.failed(error);
    }
  }
}
