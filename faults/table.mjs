// The fault harness's report of one run: a row per fault kind — operations while it lasted,
// faults injected, violations found in it, acquisition latency p50/p99 — and the run's totals.
// Pure: reads the history and the checker's result.

const quantile = (sorted, q) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]);
const ms = (value) => (Number.isNaN(value) ? '–' : value.toFixed(1));

/** A clock's skew as the table says it: `+10 s`, `+1 h`, `-4 ms`. */
function skewLabel(ms) {
  const [value, unit] = Math.abs(ms) >= 3_600_000 ? [ms / 3_600_000, 'h'] : Math.abs(ms) >= 1000 ? [ms / 1000, 's'] : [ms, 'ms'];
  return `${value > 0 ? '+' : ''}${value} ${unit}`;
}

/** One row: what happened among `events` (acquisitions and writes), and `violations`. */
function row(kind, injected, events, violations) {
  const waits = events.filter((e) => e.kind === 'acquired').map((e) => e.waitedMs).sort((a, b) => a - b);
  return { kind, operations: events.length, injected, violations: violations.length, p50Ms: quantile(waits, 0.5), p99Ms: quantile(waits, 0.99) };
}

/** `{ lines, summary }`: the table's lines, and the totals for the run's last JSON line. */
export function faultTable(history, { violations, leases, writes, order }) {
  const operations = history.filter((e) => e.kind === 'acquired' || e.kind === 'write');
  const windows = new Map(); // fault kind → [[from, to], …]
  for (const { fault, from, to } of history.filter((e) => e.kind === 'fault')) windows.set(fault, [...(windows.get(fault) ?? []), [from, to]]);
  const within = (spans, at) => at !== undefined && spans.some(([from, to]) => at >= from && at <= to);
  const rows = [...windows].map(([kind, spans]) => row(kind, spans.length, operations.filter((e) => within(spans, e.at)), violations.filter((v) => within(spans, v.at))));
  // Skew is not on the schedule: the skewed clients run skewed from start to end.
  const skews = history.filter((e) => e.kind === 'client' && e.skewMs !== 0);
  const skewed = new Set(skews.map((e) => e.client));
  const original = new Set([...skewed].map((client) => client.split('#')[0]));
  const label = `clock skew (${[...new Set(skews.map((e) => skewLabel(e.skewMs)))].join(', ')})`;
  rows.push(row(label, original.size, operations.filter((e) => skewed.has(e.client)), violations.filter((v) => v.clients?.some((c) => skewed.has(c)))));
  const all = row('all', rows.reduce((n, r) => n + r.injected, 0), operations, violations);
  const lines = [
    'fault kind                      operations  injected  violations  p50 ms  p99 ms',
    ...[...rows, all].map((r) => `${r.kind.padEnd(31)} ${String(r.operations).padStart(10)} ${String(r.injected).padStart(9)} ${String(r.violations).padStart(11)} ${ms(r.p50Ms).padStart(7)} ${ms(r.p99Ms).padStart(7)}`),
    `operations: ${leases} acquisitions, ${writes} fenced writes, ${history.filter((e) => e.kind === 'failed').length} failed turns`,
    `order: ${order.judged} waits judged; one client started at most ${order.most} turns ahead of one`,
  ];
  const summary = { operations: all.operations, ordered: order.judged, faults: all.injected, violations: all.violations, p50Ms: all.p50Ms, p99Ms: all.p99Ms, kinds: Object.fromEntries(rows.map(({ kind, ...rest }) => [kind, rest])) };
  return { lines, summary };
}
