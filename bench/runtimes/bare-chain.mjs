// The floors the serializer benchmarks compare with: keyed-serializer.js (the per-key serializer
// keyturn re-implements) with its deadline, abort signal and
// late-settle report taken out — the per-key tails, and the cleanup that lets an idle key go —
// plus only what a floor names:
// - `abort`: one AbortController per work, its signal passed to the work (default);
// - `timeoutMs`: one deadline timer per work too, armed when it starts and cleared when it
//   settles (what any serializer pays on Workers, whose works each need a timer of their own);
// - `listen`: the caller's signal, when a call passes one, gets an abort listener until the call
//   settles (what watching a caller's signal costs at the least where AbortSignal is an EventTarget).
// Used by serializer-one.mjs (Node) and serializer-worker.mjs (workerd).
const noop = () => {};

export function bareChain({ abort = true, timeoutMs, listen = false } = {}) {
  const tails = new Map();
  const listener = { handleEvent() {} };
  // The reaction that starts a work, made per call as keyed-serializer.js's is.
  const start = !abort
    ? (work) => () => work()
    : timeoutMs === undefined
      ? (work) => () => work(new AbortController().signal)
      : (work) => () => {
          const controller = new AbortController();
          const timer = setTimeout(() => controller.abort(), timeoutMs);
          const run = work(controller.signal);
          const clear = () => clearTimeout(timer);
          Promise.resolve(run).then(clear, clear);
          return run;
        };
  const serialize = (key, work, options) => {
    const previous = tails.get(key) || Promise.resolve();
    const result = previous.then(start(work));
    let tail;
    const signal = listen ? options?.signal : undefined;
    if (signal !== undefined) {
      signal.addEventListener('abort', listener);
      const unlisten = () => signal.removeEventListener('abort', listener);
      tail = result.then(unlisten, unlisten);
    } else {
      tail = result.then(noop, noop);
    }
    tails.set(key, tail);
    tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return result;
  };
  serialize.pending = () => tails.size;
  return serialize;
}
