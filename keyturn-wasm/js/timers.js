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
 * The delay of a timer that must not fire before `ms` have passed: hosts take whole
 * milliseconds, and some round a fraction down — and at most the longest a host timer honours
 * (Node fires a longer one after 1 ms), which an engine time never asks past anyway but for
 * rounding.
 * @param {number} ms
 */
export const timerDelay = (ms) => Math.min(MAX_TIMEOUT_MS, Math.max(1, Math.ceil(ms)));

/**
 * The delay of a timer that may fire up to a millisecond early (a pause between polls): `ms`
 * as it is — Node honours a fraction, browsers round it down — where rounding it up would make
 * every poll after it later too.
 * @param {number} ms
 */
export const aboutDelay = (ms) => Math.min(MAX_TIMEOUT_MS, Math.max(1, ms));

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

