// createKeyedSerializer over the serializer's wasm module (keyturn_wasm). Static JS, copied into
// pkg/ by the build; the entries initialise the module before anything here runs.
import { KeyedSerializerCore } from './keyturn_wasm.js';
import { SerializedWorkTimeout } from './errors.js';

export { SerializedWorkTimeout };

/** 30 s, as the seed (checked against the Rust constant by the tests). */
export const DEFAULT_TIMEOUT_MS = 30000;

const ignore = () => {};

// Cloudflare Workers run each request in its own I/O context: a work started from another
// request's context has its I/O cancelled when that request ends. The workerd entry turns this
// on, and then every work starts from a promise reaction its own caller registered (see
// `serializeInContext`) and gets a deadline timer of its own.
let contextual = false;

/** Called once by the workerd entry. */
export function startWorksInTheirCallersContext() {
  contextual = true;
}

/**
 * createKeyedSerializer({ timeoutMs }) → serialize(key, work, { onLateSettle })
 *
 * `serialize(key, work)` runs `work(signal)` once every work previously queued for `key` has
 * settled, and resolves or rejects as `work` does — or rejects with a `SerializedWorkTimeout`
 * (and aborts `signal`) when `work` has not settled within `timeoutMs`; `onLateSettle(value)` is
 * then called if and when that abandoned work settles, with its resolved value (undefined when it
 * rejected). `serialize.pending()` is the number of keys with queued or running work.
 */
export function createKeyedSerializer(options) {
  const core = new KeyedSerializerCore(options, {
    // Called by the core when a work's turn comes — inside a microtask or timer, never inside
    // the `serialize` call that queued it. A synchronous throw becomes a rejection.
    start(work, resolve, reject, onLateSettle) {
      let controller;
      let value;
      try {
        controller = new AbortController();
        value = work(controller.signal);
      } catch (error) {
        reject(error);
        return undefined;
      }
      if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
        // Not a thenable: the work has settled already, and nothing is left to abort.
        resolve(value);
        return undefined;
      }
      // Not `resolve(value)`: that would lock the caller's promise to the work, and a timeout
      // must still be able to reject it.
      const run = Promise.resolve(value);
      run.then(resolve, reject);
      if (onLateSettle !== undefined) {
        // Only an abandoned (aborted) work reports; a re-decision that cannot even be queued
        // changes nothing, so what the callback throws is dropped.
        const late = (settled) => {
          if (!controller.signal.aborted) return;
          try {
            onLateSettle(settled);
          } catch {
            // the next notification decides
          }
        };
        run.then(late, () => late(undefined));
      }
      return controller;
    },
    schedule() {
      queueMicrotask(drain);
    },
    timeout(key, timeoutMs) {
      return new SerializedWorkTimeout(key, timeoutMs);
    },
    contextual,
  });
  const drain = () => core.drain(performance.now());

  // Busy keys → their line in the core: its id, the last caller promise queued on it, and the
  // functions (one set per busy key, not per work) that move the key on. The core is the
  // truth; this only spares a busy key's works passing the key string again.
  const lines = new Map();
  function openLine(key, id) {
    const line = {
      id,
      tail: undefined,
      advance() {
        if (core.advance(id, performance.now())) lines.delete(key);
      },
    };
    if (contextual) {
      line.start = () => core.startHead(id, performance.now());
      line.finishIfLast = () => {
        if (core.finishIfLast(id)) lines.delete(key);
      };
    }
    lines.set(key, line);
    return line;
  }

  // One executor for every call, not a closure per work: `new Promise` runs it synchronously,
  // so it takes this call's arguments from here and leaves here the line it queued the work on
  // (and, if the key was busy, the promise queued before it). Re-entrant calls (an options
  // getter may call `serialize`) finish inside `enter` before it reads or writes these again,
  // and `finally` leaves them right even when `enter` throws.
  let callKey;
  let callWork;
  let callOptions;
  let callLine;
  let callPrevious;
  function enter(resolve, reject) {
    const key = callKey;
    const work = callWork;
    const options = callOptions;
    let queued;
    let previous;
    try {
      const line = lines.get(key);
      if (
        line !== undefined &&
        (options === undefined
          ? core.enqueueOn(line.id, work, resolve, reject)
          : core.enqueueOnWith(line.id, work, options, resolve, reject))
      ) {
        queued = line;
        previous = line.tail;
      } else {
        queued = openLine(key, core.enqueue(key, work, options, resolve, reject));
      }
    } finally {
      callLine = queued;
      callPrevious = previous;
    }
  }

  /**
   * Queues the work and answers the caller's promise; leaves in `callLine` the line it went on
   * (undefined if refused) and in `callPrevious` the promise queued before it, for the caller
   * to read at once. (Not returned in an object: that would be an allocation per work.)
   */
  function queue(key, work, options) {
    callKey = key;
    callWork = work;
    callOptions = options;
    const result = new Promise(enter);
    callKey = callWork = callOptions = undefined;
    return result;
  }

  function serialize(key, work, options) {
    const result = queue(key, work, options);
    // The key moves on once this promise settles, whatever the work did. This handler also
    // makes a rejection nobody awaits not an unhandled rejection, as in the seed, whose own
    // tail handles every result; callers that await it still see it.
    const advance = callLine === undefined ? ignore : callLine.advance;
    callLine = callPrevious = undefined;
    result.then(advance, advance);
    return result;
  }

  // The same, for Workers: the work starts from a reaction registered here, in its caller's
  // context — on the previous work's promise (when it settles or times out, this one's turn
  // has come) or, for an idle key, a microtask queued here. Each work's own promise then
  // finishes it if nobody queued behind it; otherwise the one behind does, in its context.
  function serializeInContext(key, work, options) {
    const result = queue(key, work, options);
    const line = callLine;
    const previous = callPrevious;
    callLine = callPrevious = undefined;
    if (line === undefined) {
      result.then(undefined, ignore); // refused: queued nothing
      return result;
    }
    if (previous === undefined) queueMicrotask(line.start);
    else previous.then(line.advance, line.advance);
    result.then(line.finishIfLast, line.finishIfLast);
    line.tail = result;
    return result;
  }

  const entry = contextual ? serializeInContext : serialize;
  entry.pending = () => core.pending();
  return entry;
}
