// Argument checks for every exported entry point, one check per rule. Types, option names and
// well-formed strings are checked here; the rules on values (a key's length, a deadline's range)
// and every default are the engine's, whose refusal codes `refusalError` turns into errors.
// Every text is the crate's (constants.js). Static JS, copied into pkg/ by the build.
import {
  MAX_CONCURRENCY,
  MAX_KEY_BYTES,
  MAX_RATE_LIMIT,
  MAX_TIMEOUT_MS,
  MESSAGES,
  REFUSED_BAD_CONCURRENCY,
  REFUSED_BAD_MAX_PENDING,
  REFUSED_BAD_RATE_LIMIT,
  REFUSED_BAD_RATE_PERIOD,
  REFUSED_BAD_SKEW,
  REFUSED_BAD_STALE,
  REFUSED_BAD_STORE_TIMEOUT,
  REFUSED_BAD_TIMEOUT,
  REFUSED_BAD_WAIT,
  REFUSED_KEY_EMPTY,
  REFUSED_KEY_TOO_LONG,
  fill,
} from './constants.js';

/**
 * What `typeof` says, with `null` told apart, for messages.
 * @param {unknown} value
 */
export const describe = (value) => (value === null ? 'null' : typeof value);

/**
 * @param {string} template
 * @param {Record<string, unknown>} values
 */
export function typeError(template, values) {
  return new TypeError(`keyturn: ${fill(template, values)}`);
}

/**
 * @param {string} template
 * @param {Record<string, unknown>} values
 */
export function rangeError(template, values) {
  return new RangeError(`keyturn: ${fill(template, values)}`);
}

/**
 * A `TypeError`: `what` must be `expected`.
 * @param {string} what
 * @param {string} expected
 * @param {unknown} value
 */
export function wrongType(what, expected, value) {
  return typeError(MESSAGES.wrongType, { what, expected, actual: describe(value) });
}

// For runtimes without String.prototype.isWellFormed (Node < 20).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A key or lock name must be a well-formed string: a lone surrogate would reach wasm as U+FFFD,
 * and two different keys must not become one. Its emptiness and length are the core's to check.
 * @param {unknown} key
 * @param {string} what
 * @returns {asserts key is string}
 */
export function checkKey(key, what) {
  if (typeof key !== 'string') throw wrongType(what, 'a non-empty string', key);
  const wellFormed = /** @type {{ isWellFormed?: () => boolean }} */ (/** @type {unknown} */ (key)).isWellFormed;
  if (!(wellFormed?.call(key) ?? !LONE_SURROGATE.test(key))) throw typeError(MESSAGES.keyLoneSurrogate, { what });
}

/**
 * A number option, or `undefined` for the core's default: a `TypeError` when it is neither (its
 * range is the core's).
 * @param {unknown} value
 * @param {string} what
 * @returns {number | undefined}
 */
export function optionalNumber(value, what) {
  if (value !== undefined && typeof value !== 'number') throw wrongType(what, 'a number or undefined', value);
  return value;
}

/**
 * @param {unknown} value
 * @param {string} what
 * @returns {boolean | undefined}
 */
export function optionalBoolean(value, what) {
  if (value !== undefined && typeof value !== 'boolean') throw wrongType(what, 'a boolean or undefined', value);
  return value;
}

/**
 * @template {Function} F
 * @param {F | undefined} value
 * @param {string} what
 * @returns {F | undefined}
 */
export function optionalFunction(value, what) {
  if (value !== undefined && typeof value !== 'function') throw wrongType(what, 'a function or undefined', value);
  return value;
}

/**
 * A call's `coalesce` option as the core's wire takes it: `undefined` for none (`false` or
 * absent), `''` for `true` (a group name is never empty), else the group's name.
 * @param {unknown} value
 * @param {string} what
 * @returns {string | undefined}
 */
export function coalesceGroup(value, what) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return '';
  if (typeof value === 'string' && value.length > 0) return value;
  throw wrongType(what, 'true, false, a non-empty string or undefined', value);
}

/**
 * Whether `value` is an AbortSignal, or an object that behaves as one (a polyfill's, another realm's).
 * @param {unknown} value
 * @returns {value is AbortSignal}
 */
export const isAbortSignal = (value) =>
  typeof value === 'object' &&
  value !== null &&
  typeof (/** @type {{ aborted?: unknown }} */ (value).aborted) === 'boolean' &&
  typeof (/** @type {{ addEventListener?: unknown }} */ (value).addEventListener) === 'function';

/**
 * @param {unknown} value
 * @param {string} what
 * @returns {AbortSignal | undefined}
 */
export function optionalSignal(value, what) {
  if (value !== undefined && !isAbortSignal(value)) throw wrongType(what, 'an AbortSignal or undefined', value);
  return value;
}

/**
 * The names an options object may carry. A name it does not know is a mistake whose effect
 * would be silent (`{ timeout: 1000 }` keeping the default deadline), so it is refused, naming
 * the option the caller most likely meant.
 */
export class OptionNames {
  /**
   * @param {string[]} names
   * @param {Record<string, string>} [meant] words other libraries use (lower case, no `ms`, `_`
   *   or `-`) → the option here that means it: spelling alone would send `ttl` to `now` and a
   *   lock's `timeoutMs` to `storeTimeoutMs`
   * @param {string} [listed] said after the hint: what these options are, where a name alone misleads
   */
  constructor(names, meant = {}, listed = '') {
    this.names = new Set(names);
    this.meant = new Map(Object.entries(meant));
    this.listed = listed;
  }

  /**
   * Checks `options` (named `what`): undefined, or an object with known option names only.
   * @param {unknown} options
   * @param {string} what
   */
  check(options, what) {
    if (options === undefined) return;
    if (options === null || typeof options !== 'object') throw wrongType(what, 'an object or undefined', options);
    // `in`, as reading the options does: inherited names count, getters are not called.
    for (const name in options) {
      if (!this.names.has(name)) throw typeError(MESSAGES.unknownOption, { what, name, closest: this.closest(name), also: this.listed });
    }
  }

  /**
   * The known name `name` most likely meant: the one a word of another library means (`ttl`,
   * `leaseMs`), else, letter case aside, one it begins (`timeout` → `timeoutMs`), else the one
   * fewest edits away.
   * @param {string} name
   */
  closest(name) {
    const lower = name.toLowerCase();
    const meant = this.meant.get(lower.replace(/[_-]/g, '').replace(/ms$/, ''));
    if (meant !== undefined) return meant;
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

const RATE_FIELDS = new OptionNames(['limit', 'periodMs'], { max: 'limit', count: 'limit', requests: 'limit', period: 'periodMs', window: 'periodMs', interval: 'periodMs', per: 'periodMs', duration: 'periodMs' });

/**
 * A serializer's `rate`: `undefined`, or an object with the numbers `limit` and `periodMs` and
 * nothing else — a `TypeError` naming the field otherwise (their ranges are the engine's).
 * @param {unknown} value
 * @param {string} what
 * @returns {{ limit: number, periodMs: number } | undefined}
 */
export function rateOption(value, what) {
  if (value === undefined) return undefined;
  RATE_FIELDS.check(value, what);
  const { limit, periodMs } = /** @type {{ limit?: unknown, periodMs?: unknown }} */ (value);
  if (typeof limit !== 'number') throw wrongType(`${what}.limit`, 'a number', limit);
  if (typeof periodMs !== 'number') throw wrongType(`${what}.periodMs`, 'a number', periodMs);
  return { limit, periodMs };
}

/**
 * A serializer's `scope`: `undefined`, or `'isolate'` (one isolate is meant: `true`); any other
 * value is a `RangeError` (its conflict with a store is the engine's to refuse).
 * @param {unknown} value
 * @param {string} what
 */
export function scopeOption(value, what) {
  if (value === undefined) return false;
  if (value === 'isolate') return true;
  throw rangeError(MESSAGES.scopeValue, { what, value: typeof value === 'string' ? `'${value}'` : describe(value) });
}

/**
 * Insertions, deletions, substitutions and swaps of neighbours between `a` and `b`.
 * @param {string} a
 * @param {string} b
 */
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
 * Each value refusal of the engine's (`REFUSED_*`): its message, the option it names (a field
 * of `rate` after a dot) and the bound the message says.
 * @type {Record<number, [string, string, number]>}
 */
const REFUSALS = {
  [REFUSED_BAD_TIMEOUT]: [MESSAGES.timeoutRange, 'timeoutMs', MAX_TIMEOUT_MS],
  [REFUSED_BAD_MAX_PENDING]: [MESSAGES.maxPendingRange, 'maxPending', MAX_TIMEOUT_MS],
  [REFUSED_BAD_CONCURRENCY]: [MESSAGES.concurrencyRange, 'concurrency', MAX_CONCURRENCY],
  [REFUSED_BAD_RATE_LIMIT]: [MESSAGES.concurrencyRange, 'rate.limit', MAX_RATE_LIMIT],
  [REFUSED_BAD_RATE_PERIOD]: [MESSAGES.timeoutRange, 'rate.periodMs', MAX_TIMEOUT_MS],
  [REFUSED_BAD_WAIT]: [MESSAGES.waitRange, 'waitMs', MAX_TIMEOUT_MS],
  [REFUSED_BAD_STALE]: [MESSAGES.staleRange, 'staleMs', MAX_TIMEOUT_MS],
  [REFUSED_BAD_SKEW]: [MESSAGES.skewRange, 'maxClockSkewMs', MAX_TIMEOUT_MS],
  [REFUSED_BAD_STORE_TIMEOUT]: [MESSAGES.timeoutRange, 'storeTimeoutMs', MAX_TIMEOUT_MS],
};

/**
 * The error of a value the engine refused (`code`, one of `REFUSED_*`), naming the argument
 * (`keyWhat` for the key) with its value from `given`, what the caller gave.
 * @param {number} code
 * @param {Record<string, any>} given
 * @param {string} keyWhat
 */
export function refusalError(code, given, keyWhat) {
  if (code === REFUSED_KEY_EMPTY) return typeError(MESSAGES.keyEmpty, { what: keyWhat });
  if (code === REFUSED_KEY_TOO_LONG) return rangeError(MESSAGES.keyTooLong, { what: keyWhat, bytes: new TextEncoder().encode(given.key).length, max: MAX_KEY_BYTES });
  const refusal = REFUSALS[code];
  if (refusal === undefined) return rangeError(MESSAGES.tooManyWorks, {});
  const [template, option, max] = refusal;
  const [name, field] = option.split('.');
  return rangeError(template, { what: `options.${option}`, value: field === undefined ? given[name] : given[name]?.[field], max });
}
