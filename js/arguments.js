// Argument checks for every exported entry point, one check per rule. Types, option names and
// well-formed strings are checked here; the rules on values (a key's length, a deadline's range)
// are the cores', whose refusal codes the callers turn into errors with `keyError` and
// `rangeError`. Every text is the crate's (constants.js). Static JS, copied into pkg/ by the build.
import { LOCK_BAD_SKEW, LOCK_BAD_STORE_TIMEOUT, LOCK_BAD_WAIT, LOCK_STALE_MS, MAX_KEY_BYTES, MAX_TIMEOUT_MS, MESSAGES, fill } from './constants.js';

/** What `typeof` says, with `null` told apart, for messages. */
export const describe = (value) => (value === null ? 'null' : typeof value);

export function typeError(template, values) {
  return new TypeError(`keyturn: ${fill(template, values)}`);
}

export function rangeError(template, values) {
  return new RangeError(`keyturn: ${fill(template, values)}`);
}

/** A `TypeError`: `what` must be `expected`. */
export function wrongType(what, expected, value) {
  return typeError(MESSAGES.wrongType, { what, expected, actual: describe(value) });
}

// For runtimes without String.prototype.isWellFormed (Node < 20).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A key or lock name must be a well-formed string: a lone surrogate would reach wasm as U+FFFD,
 * and two different keys must not become one. Its emptiness and length are the core's to check.
 */
export function checkKey(key, what) {
  if (typeof key !== 'string') throw wrongType(what, 'a non-empty string', key);
  if (!(key.isWellFormed?.() ?? !LONE_SURROGATE.test(key))) throw typeError(MESSAGES.keyLoneSurrogate, { what });
}

/** The error for a key the core refused: empty (`empty`), or too long. */
export function keyError(what, key, empty) {
  if (empty) return typeError(MESSAGES.keyEmpty, { what });
  return rangeError(MESSAGES.keyTooLong, { what, bytes: new TextEncoder().encode(key).length, max: MAX_KEY_BYTES });
}

/** A number option: `fallback` when undefined, a `TypeError` when not a number (its range is the core's). */
export function optionalNumber(value, what, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') throw wrongType(what, 'a number or undefined', value);
  return value;
}

export function optionalFunction(value, what) {
  if (value !== undefined && typeof value !== 'function') throw wrongType(what, 'a function or undefined', value);
  return value;
}

/**
 * A call's `coalesce` option as the core's wire takes it: `undefined` for none (`false` or
 * absent), `''` for `true` (a group name is never empty), else the group's name.
 */
export function coalesceGroup(value, what) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return '';
  if (typeof value === 'string' && value.length > 0) return value;
  throw wrongType(what, 'true, false, a non-empty string or undefined', value);
}

/** Whether `value` is an AbortSignal, or an object that behaves as one (a polyfill's, another realm's). */
export const isAbortSignal = (value) =>
  typeof value === 'object' && value !== null && typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function';

export function optionalSignal(value, what) {
  if (value !== undefined && !isAbortSignal(value)) throw wrongType(what, 'an AbortSignal or undefined', value);
  return value;
}

/**
 * The names an options object may carry. A name it does not know is a mistake whose effect
 * would be silent (`{ timeout: 1000 }` keeping the default deadline), so it is refused.
 */
export class OptionNames {
  constructor(names) {
    this.names = new Set(names);
  }

  /** Checks `options` (named `what`): undefined, or an object with known option names only. */
  check(options, what) {
    if (options === undefined) return;
    if (options === null || typeof options !== 'object') throw wrongType(what, 'an object or undefined', options);
    // `in`, as reading the options does: inherited names count, getters are not called.
    for (const name in options) {
      if (!this.names.has(name)) throw typeError(MESSAGES.unknownOption, { what, name, closest: this.closest(name) });
    }
  }

  /**
   * The known name most like `name`, letter case aside: one it begins (`timeout` →
   * `timeoutMs`), else the one fewest edits away.
   */
  closest(name) {
    const lower = name.toLowerCase();
    let best;
    let bestDistance = Infinity;
    for (const known of this.names) {
      const candidate = known.toLowerCase();
      const distance = candidate.startsWith(lower) ? -1 / candidate.length : editDistance(lower, candidate);
      if (distance < bestDistance) {
        best = known;
        bestDistance = distance;
      }
    }
    return best;
  }
}

/** Insertions, deletions, substitutions and swaps of neighbours between `a` and `b`. */
function editDistance(a, b) {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, rows[i - 2][j - 2] + 1);
      rows[i][j] = distance;
    }
  }
  return rows[a.length][b.length];
}

/**
 * The lease options of a lock or a serializer's turn: numbers, their ranges the core's —
 * `storeTimeoutMs` NaN for its default, the lease (so a NaN given is refused here).
 */
export function leaseOptions(options, waitMs) {
  const storeTimeoutMs = optionalNumber(options?.storeTimeoutMs, 'options.storeTimeoutMs', NaN);
  if (Number.isNaN(options?.storeTimeoutMs)) throw rangeError(MESSAGES.timeoutRange, { what: 'options.storeTimeoutMs', value: NaN, max: MAX_TIMEOUT_MS });
  return {
    waitMs,
    staleMs: optionalNumber(options?.staleMs, 'options.staleMs', LOCK_STALE_MS),
    maxClockSkewMs: optionalNumber(options?.maxClockSkewMs, 'options.maxClockSkewMs', 0),
    storeTimeoutMs,
  };
}

/** The error for a lease option the lock's rules refused (`code`, negative), naming it with its value from `options`. */
export function leaseOptionError(code, options) {
  if (code === LOCK_BAD_WAIT) return rangeError(MESSAGES.waitRange, { what: 'options.waitMs', value: options.waitMs });
  if (code === LOCK_BAD_SKEW) return rangeError(MESSAGES.skewRange, { what: 'options.maxClockSkewMs', value: options.maxClockSkewMs, max: MAX_TIMEOUT_MS });
  if (code === LOCK_BAD_STORE_TIMEOUT) return rangeError(MESSAGES.timeoutRange, { what: 'options.storeTimeoutMs', value: options.storeTimeoutMs, max: MAX_TIMEOUT_MS });
  return rangeError(MESSAGES.staleRange, { what: 'options.staleMs', value: options.staleMs });
}
