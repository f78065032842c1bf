// Tracing through `node:diagnostics_channel`, where the host has it: Node, Deno, Bun, and
// Workers with `nodejs_compat`. Browsers and Workers without it have none, so nothing is
// imported: each entry hands the module over (`useDiagnostics`) as its platform gives it
// cheapest — most ask `process.getBuiltinModule` (`builtinDiagnostics`); Deno imports it, since
// reading its `process` global loads Node's whole process object. Without it every channel is
// `undefined` and nothing is published. A message is built only while its channel has a
// subscriber: each site checks `hasSubscribers` first. The channels observe; they decide
// nothing. Static JS, copied into pkg/ by the build. docs/tracing.md says what each channel
// publishes.

import { METHOD_NAMES } from './constants.js';

/**
 * What the package uses of `node:diagnostics_channel`.
 * @typedef {{ channel: (name: string) => Channel }} Diagnostics
 * @typedef {{ readonly hasSubscribers: boolean, publish: (message: unknown) => void }} Channel
 */

/** The channels, by what they trace (docs/tracing.md). */
export class Channels {
  /** @param {Diagnostics} diagnostics */
  constructor(diagnostics) {
    this.wait = diagnostics.channel('keyturn:turn:wait');
    this.start = diagnostics.channel('keyturn:turn:start');
    this.end = diagnostics.channel('keyturn:turn:end');
    this.acquire = diagnostics.channel('keyturn:lock:acquire');
    this.release = diagnostics.channel('keyturn:lock:release');
    this.lost = diagnostics.channel('keyturn:lock:lost');
    this.store = diagnostics.channel('keyturn:store');
  }

  /** Whether any turn channel has a subscriber: a call's turn is traced from then on. */
  turns() {
    return this.wait.hasSubscribers || this.start.hasSubscribers || this.end.hasSubscribers;
  }
}

/**
 * The host's `node:diagnostics_channel`, as `process.getBuiltinModule` gives it (Node ≥ 20.16,
 * Bun, Workers with `nodejs_compat`); `undefined` without it.
 * @returns {Diagnostics | undefined}
 */
export function builtinDiagnostics() {
  try {
    return /** @type {{ process?: { getBuiltinModule?: (name: string) => Diagnostics | undefined } }} */ (globalThis).process?.getBuiltinModule?.('node:diagnostics_channel');
  } catch {
    return undefined;
  }
}

/** @type {Channels | undefined} the host's channels, if it has them */
export let channels;

/**
 * The entry's `node:diagnostics_channel` (`undefined`: the host has none), before any call.
 * @param {Diagnostics | undefined} diagnostics
 */
export function useDiagnostics(diagnostics) {
  if (channels === undefined && diagnostics !== undefined) channels = new Channels(diagnostics);
}

let ids = 0;

/**
 * The trace of a job's turn, if it was traced (see `TurnTrace.wrap`).
 * @param {{ resolve: Function & { trace?: TurnTrace } }} job
 */
export const traceOf = (job) => job.resolve.trace;

/**
 * One call's turn, traced from the moment a turn channel had a subscriber (its queuing, or its
 * start): it wraps its job's resolvers, so its end is published however the call ends.
 */
export class TurnTrace {
  /**
   * @param {Channels} channels
   * @param {string} key
   * @param {number} queuedAt NaN: queued before anyone subscribed
   */
  constructor(channels, key, queuedAt) {
    this.channels = channels;
    this.id = ++ids;
    this.key = key;
    this.queuedAt = queuedAt;
    /** @type {number | undefined} */
    this.slot = undefined;
    /** @type {number | undefined} */
    this.fence = undefined;
    this.startedAt = NaN;
    this.ended = false;
  }

  /**
   * Publishes its end before `job`'s caller is told (the same synchronous step).
   * @param {{ resolve: (value: unknown) => void, reject: (error: unknown) => void }} job
   */
  wrap(job) {
    const { resolve, reject } = job;
    /** @param {unknown} value */
    const traced = (value) => {
      this.end(true, undefined);
      resolve(value);
    };
    // (Found again from the job by its resolver: no map beside the jobs, no field on each.)
    traced.trace = this;
    job.resolve = traced;
    job.reject = (error) => {
      this.end(false, error);
      reject(error);
    };
  }

  waited() {
    return Number.isNaN(this.queuedAt) ? undefined : this.startedAt - this.queuedAt;
  }

  queued() {
    const wait = this.channels.wait;
    if (wait.hasSubscribers) wait.publish({ id: this.id, key: this.key });
  }

  /**
   * @param {number} slot
   * @param {number} fence
   */
  started(slot, fence) {
    this.slot = slot;
    this.fence = fence;
    this.startedAt = performance.now();
    const start = this.channels.start;
    if (start.hasSubscribers) start.publish({ id: this.id, key: this.key, slot, fence, waitedMs: this.waited() });
  }

  /**
   * @param {boolean} ok
   * @param {unknown} error
   */
  end(ok, error) {
    if (this.ended) return;
    this.ended = true;
    const end = this.channels.end;
    if (!end.hasSubscribers) return;
    const started = !Number.isNaN(this.startedAt);
    end.publish({
      id: this.id,
      key: this.key,
      slot: this.slot,
      fence: this.fence,
      waitedMs: started ? this.waited() : undefined,
      heldMs: started ? performance.now() - this.startedAt : undefined,
      ok,
      error,
    });
  }
}

/**
 * Publishes a store call's answer (`ok`) or failure: its method (`METHOD_*`), key, time since
 * `sentAt` and outcome — `found`/`missing` (read), `written`/`refused` (create, replace: the
 * version, or null for a refused condition), `changed`/`unchanged` (changed), or `failed`.
 * @param {Channel} channel
 * @param {number} method
 * @param {string} key
 * @param {number} sentAt
 * @param {boolean} ok
 * @param {unknown} value
 */
export function storeCalled(channel, method, key, sentAt, ok, value) {
  const name = METHOD_NAMES[method];
  let outcome = 'failed';
  if (ok) {
    if (name === 'read') outcome = value === null || value === undefined ? 'missing' : 'found';
    else if (name === 'changed') outcome = value === true ? 'changed' : 'unchanged';
    else outcome = typeof value === 'string' ? 'written' : 'refused';
  }
  channel.publish({ method: name, key, ms: performance.now() - sentAt, outcome, error: ok ? undefined : value });
}
