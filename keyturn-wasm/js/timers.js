// What the package's drivers do with their host's timers, in one place. Static JS, copied into
// pkg/ by the build.

/**
 * Clears a timer; one that cannot be cleared fires into a job or serializer that ignores it.
 * @param {ReturnType<typeof setTimeout> | undefined} timer
 */
export const clear = (timer) => {
  try {
    clearTimeout(timer);
  } catch {
    // nothing to do: what it would have ended has ended
  }
};

/**
 * The delay of a timer that must not fire before `ms` have passed: hosts take whole
 * milliseconds, and some round a fraction down.
 * @param {number} ms
 */
export const timerDelay = (ms) => Math.max(1, Math.ceil(ms));

/**
 * A timer that only guards something else (a deadline, a lease's end, a renewal) must not keep a
 * Node process alive: Node answers a Timeout object with `unref`; browsers and Workers a number.
 * @template T
 * @param {T} timer
 * @returns {T}
 */
export const unref = (timer) => {
  /** @type {{ unref?: () => void } | undefined} */ (timer)?.unref?.();
  return timer;
};
