// What the bench scripts share: their `--name value` options, and the median they print.

const args = process.argv.slice(2);

/**
 * The value after `--name` on the command line, or `fallback`.
 * @param {string} name
 * @param {string} fallback
 */
export const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : args[at + 1];
};

/**
 * `--name`'s value as a number, or `fallback`.
 * @param {string} name
 * @param {number} fallback
 */
export const numberOption = (name, fallback) => Number(option(name, String(fallback)));

/** Whether `--name` was given. */
export const given = (name) => args.includes(`--${name}`);

/** The median: the middle value, or the mean of the two middle ones. */
export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
