// Counts the timers armed through the global `setTimeout` and not yet fired or cleared — unref'd
// ones included, which `process.getActiveResourcesInfo()` leaves out. Runs in Node and, imported
// by a worker script, in workerd.

/**
 * Wraps the global `setTimeout` and `clearTimeout`: `live` holds the timers pending now,
 * `armed()` counts every timer armed since, `original` is the unwrapped `setTimeout` (call it
 * as a plain function: workerd refuses it another receiver), and
 * `restore()` puts the globals back.
 */
export function watchTimers() {
  const live = new Set();
  const { setTimeout: original, clearTimeout: originalClear } = globalThis;
  let armed = 0;
  globalThis.setTimeout = (callback, ms, ...args) => {
    armed += 1;
    const timer = original(() => {
      live.delete(timer);
      callback(...args);
    }, ms);
    live.add(timer);
    return timer;
  };
  globalThis.clearTimeout = (timer) => {
    live.delete(timer);
    originalClear(timer);
  };
  return {
    live,
    armed: () => armed,
    original,
    restore() {
      globalThis.setTimeout = original;
      globalThis.clearTimeout = originalClear;
    },
  };
}
