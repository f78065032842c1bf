// What the package's JS does with its host's timers, in one place. Static JS, copied into pkg/
// by the build.
import { MAX_TIMEOUT_MS } from './constants.js';

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
 * The delay of a timer for the monotonic time `at`, at most the longest a host timer honours
 * (Node fires a longer one after 1 ms), which an engine time never asks past anyway but for
 * rounding. It must not fire before `at`: hosts take whole milliseconds, and some round a
 * fraction down — unless it may fire up to a millisecond early (`early`: a pause between
 * polls), where rounding up would make every poll after it later too.
 * @param {number} at
 * @param {boolean} early
 */
export function delayTo(at, early) {
  const ms = at - performance.now();
  return Math.min(MAX_TIMEOUT_MS, Math.max(1, early ? ms : Math.ceil(ms)));
}

/**
 * Whether `timer` keeps the process alive (`on`): Node's timers have `ref`/`unref`; Deno's are
 * numbers with `Deno.refTimer`/`Deno.unrefTimer`; elsewhere nothing is kept alive by a timer.
 * @param {ReturnType<typeof setTimeout>} timer
 * @param {boolean} on
 */
export function keepAlive(timer, on) {
  if (typeof timer === 'object') {
    const node = /** @type {{ ref?: () => void, unref?: () => void }} */ (timer);
    if (on) node.ref?.();
    else node.unref?.();
    return;
  }
  /** @type {{ Deno?: { refTimer?: (id: number) => void, unrefTimer?: (id: number) => void } }} */
  const global = /** @type {any} */ (globalThis);
  if (on) global.Deno?.refTimer?.(/** @type {number} */ (timer));
  else global.Deno?.unrefTimer?.(/** @type {number} */ (timer));
}

