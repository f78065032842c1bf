// The fault harness's history checker (faults/checker.mjs): a clean history passes, and each
// broken promise is found — the harness is trusted only once its checker sees what it must.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { check } from '../../faults/checker.mjs';
import { faultTable } from '../../faults/table.mjs';

const options = { maxClockSkewMs: 6000, liveWithinMs: 1000 };
const properties = (history) => check(history, options).violations.map((v) => v.property);

/** Two clients taking turns on one name and one counter, every write accepted. */
function cleanHistory() {
  return [
    { kind: 'client', client: 'a', skewMs: 0 },
    { kind: 'client', client: 'b', skewMs: 5000 },
    { kind: 'acquired', client: 'a', name: 'n', token: 't1', fence: 1, at: 0, heldUntil: 2000 },
    { kind: 'write', client: 'a', resource: 'counter', token: 't1', fence: 1, outcome: 'ok' },
    { kind: 'released', client: 'a', name: 'n', token: 't1', at: 10 },
    { kind: 'acquired', client: 'b', name: 'n', token: 't2', fence: 2, at: 12, heldUntil: 2012 },
    { kind: 'write', client: 'b', resource: 'counter', token: 't2', fence: 2, outcome: 'info' },
    { kind: 'released', client: 'b', name: 'n', token: 't2', at: 20 },
    { kind: 'healed', at: 15 },
    { kind: 'acquired', client: 'a', name: 'n', token: 't3', fence: 3, at: 25, heldUntil: 2025 },
    { kind: 'write', client: 'a', resource: 'counter', token: 't3', fence: 3, outcome: 'ok' },
    { kind: 'released', client: 'a', name: 'n', token: 't3', at: 30 },
    { kind: 'acquired', client: 'b', name: 'n', token: 't4', fence: 4, at: 40, heldUntil: 2040 },
    { kind: 'released', client: 'b', name: 'n', token: 't4', at: 41 },
    { kind: 'final', resource: 'counter', value: 3, accepted: [{ fence: 1, token: 't1' }, { fence: 2, token: 't2' }, { fence: 3, token: 't3' }] },
  ];
}

const replace = (history, index, event) => history.map((e, i) => (i === index ? event : e));

test('a clean history, an indeterminate write either way, breaks nothing', () => {
  assert.deepEqual(check(cleanHistory(), options), { violations: [], order: { judged: 0, most: 0 }, leases: 4, writes: 3, failed: 0 });
  const notApplied = cleanHistory();
  notApplied[notApplied.length - 1] = { ...notApplied.at(-1), value: 2, accepted: [{ fence: 1, token: 't1' }, { fence: 3, token: 't3' }] };
  assert.deepEqual(properties(notApplied), []);
});

test('overlapping leases of judged clients break exclusion; an hour-ahead or paused client is judged by fences alone', () => {
  const history = cleanHistory();
  // b acquires before a released: a takeover that ignored skew, say.
  const overlap = replace(history, 5, { ...history[5], at: 5 });
  assert.deepEqual(properties(overlap), ['one holder at a time']);
  const hourAhead = overlap.map((e) => (e.kind === 'client' && e.client === 'b' ? { ...e, skewMs: 3_600_000 } : e));
  assert.deepEqual(properties(hourAhead), []);
  const paused = [...overlap, { kind: 'paused', client: 'a', from: 2, to: 8 }];
  assert.deepEqual(properties(paused), []);
  // A lease an hour-ahead client overlapped may have been taken over by it: judged by fences too.
  const disturbed = [
    ...overlap,
    { kind: 'client', client: 'z', skewMs: 3_600_000 },
    { kind: 'acquired', client: 'z', name: 'n', token: 'tz', fence: 9, at: 3, heldUntil: 4 },
    { kind: 'killed', client: 'z', at: 5 },
  ];
  assert.deepEqual(properties(disturbed), []);
  assert.deepEqual(properties([...history, ...disturbed.slice(-3)]), [], 'and elsewhere nothing changes');
  // A lease past its heldUntil is no longer held: a takeover after it is fine.
  const lapsed = replace(replace(history, 2, { ...history[2], heldUntil: 4 }), 5, { ...history[5], at: 5 });
  assert.deepEqual(properties(lapsed), []);
});

test('a resource that accepts a lower fence, or one fence from two holders, is caught', () => {
  const history = cleanHistory();
  const final = history.at(-1);
  const lower = replace(history, history.length - 1, { ...final, accepted: [{ fence: 2, token: 't2' }, { fence: 1, token: 't1' }, { fence: 3, token: 't3' }] });
  assert.deepEqual(properties(lower), ['fences rise']);
  const shared = replace(history, history.length - 1, { ...final, accepted: [{ fence: 1, token: 't1' }, { fence: 1, token: 'tX' }, { fence: 3, token: 't3' }] });
  assert.deepEqual(properties(shared), ['one holder per fence']);
  const retried = replace(history, history.length - 1, { ...final, accepted: [{ fence: 1, token: 't1' }, { fence: 1, token: 't1' }, { fence: 3, token: 't3' }] });
  assert.deepEqual(properties(retried), [], 'a retry by the same holder is fine');
});

test('after a store fault two leases may overlap, as the store lost what made them exclusive; a fence accepted twice is still caught', () => {
  const history = cleanHistory();
  // b acquires before a released: the store lost a's record between them.
  const overlap = replace(history, 5, { ...history[5], at: 5 });
  const lost = [...overlap, { kind: 'fault', fault: 'record evicted', client: 'a', from: 2, to: 3, store: true }];
  assert.deepEqual(properties(lost), []);
  // A store fault that ended before a's record, or began after b's answer, excuses nothing.
  for (const [from, to] of [[-5, -1], [6, 8]]) {
    assert.deepEqual(properties([...overlap, { kind: 'fault', fault: 'record evicted', client: 'a', from, to, store: true }]), ['one holder at a time']);
  }
  // Nor does another fault.
  assert.deepEqual(properties([...overlap, { kind: 'fault', fault: 'latency', client: 'a', from: 2, to: 3 }]), ['one holder at a time']);
  // The fences must keep the resource safe all the same.
  const final = lost.at(-2);
  const twice = replace(lost, lost.length - 2, { ...final, accepted: [{ fence: 1, token: 't1' }, { fence: 1, token: 't2' }, { fence: 3, token: 't3' }] });
  assert.deepEqual(properties(twice), ['one holder per fence']);
  const lower = replace(lost, lost.length - 2, { ...final, accepted: [{ fence: 2, token: 't2' }, { fence: 1, token: 't1' }, { fence: 3, token: 't3' }] });
  assert.deepEqual(properties(lower), ['fences rise']);
});

test('an answer that arrives after a later holder\'s, its record written before a store fault that lost it, is excused as that fault\'s; without the fault it is not', () => {
  const staleMs = 2000;
  const history = [
    { kind: 'client', client: 'a', skewMs: 0 },
    { kind: 'client', client: 'b', skewMs: 0 },
    // b's record written at 3 and heard at 4; a's written at 1 but heard only at 6.
    { kind: 'acquired', client: 'b', name: 'n', token: 't2', fence: 2, at: 4, heldUntil: 3 + staleMs },
    { kind: 'acquired', client: 'a', name: 'n', token: 't1', fence: 1, at: 6, heldUntil: 1 + staleMs },
    { kind: 'released', client: 'a', name: 'n', token: 't1', at: 10 },
    { kind: 'released', client: 'b', name: 'n', token: 't2', at: 12 },
    { kind: 'final', resource: 'counter', value: 0, accepted: [] },
  ];
  const judged = (events) => check(events, { ...options, staleMs }).violations.map((v) => v.property);
  assert.deepEqual(judged(history), ['one holder at a time']);
  assert.deepEqual(judged([...history, { kind: 'fault', fault: 'restart', from: 2, to: 2.5, store: true }]), []);
  assert.deepEqual(judged([...history, { kind: 'fault', fault: 'restart', from: 0, to: 0.5, store: true }]), ['one holder at a time'], 'a fault before both records excuses nothing');
});

test('a counter that lost an accepted increment, or counted one twice, is caught', () => {
  const history = cleanHistory();
  const final = history.at(-1);
  assert.deepEqual(properties(replace(history, history.length - 1, { ...final, value: 1 })), ['nothing lost, nothing twice']);
  assert.deepEqual(properties(replace(history, history.length - 1, { ...final, value: 4 })), ['nothing lost, nothing twice']);
  // t4's holder was killed between sending its increment and hearing the answer: indeterminate.
  const unanswered = [...history.slice(0, -1), { kind: 'invoke', client: 'b', resource: 'counter', token: 't4', fence: 4 }, { ...final, value: 4 }];
  assert.deepEqual(properties(unanswered), []);
  assert.deepEqual(properties(replace(unanswered, unanswered.length - 1, { ...final, value: 5 })), ['nothing lost, nothing twice']);
});

test('a client that acquires nothing within the bound after the heal is caught, unless it was killed', () => {
  const history = cleanHistory().filter((e) => !(e.kind === 'acquired' && e.token === 't4'));
  assert.deepEqual(properties(history), ['live after healing']);
  assert.deepEqual(properties([...history, { kind: 'killed', client: 'b', at: 16 }]), []);
});

test('crashes and unknown events are violations', () => {
  assert.deepEqual(properties([...cleanHistory(), { kind: 'crash', client: 'a', detail: 'unhandled rejection' }]), ['no crash']);
  assert.deepEqual(properties([...cleanHistory(), { kind: 'oops' }]), ['history']);
});

test("a disposed isolate's lease stays held until its heldUntil: a taker before then breaks exclusion", () => {
  const history = cleanHistory().filter((e) => !(e.kind === 'released' && e.token === 't1'));
  const disposed = [...history.slice(0, 4), { kind: 'disposed', client: 'a', at: 11 }, ...history.slice(4)];
  assert.deepEqual(properties(disposed), Array(3).fill('one holder at a time'), 'each later lease overlapped it');
  const lapsed = disposed.map((e) => (e.token === 't1' && e.kind === 'acquired' ? { ...e, heldUntil: 12 } : e));
  assert.deepEqual(properties(lapsed), []);
});

test('the report counts operations, faults and violations per fault kind, and skew per skewed client', () => {
  const history = [
    ...cleanHistory(),
    { kind: 'fault', fault: 'latency', client: 'a', from: -1, to: 11 },
    { kind: 'fault', fault: 'latency', client: 'b', from: 39, to: 50 },
    { kind: 'fault', fault: 'killed', client: 'a', from: 100, to: 101 },
  ].map((e) => (e.kind === 'write' ? { ...e, at: { t1: 5, t2: 15, t3: 27 }[e.token] } : e.kind === 'acquired' ? { ...e, waitedMs: { t1: 1, t2: 2, t3: 3, t4: 4 }[e.token] } : e));
  const overlap = history.map((e) => (e.token === 't2' && e.kind === 'acquired' ? { ...e, at: 5 } : e));
  const { lines, summary } = faultTable(overlap, check(overlap, options));
  assert.deepEqual(summary.kinds.latency, { operations: 4, injected: 2, violations: 1, p50Ms: 2, p99Ms: 4 });
  assert.deepEqual(summary.kinds.killed, { operations: 0, injected: 1, violations: 0, p50Ms: NaN, p99Ms: NaN });
  assert.deepEqual(summary.kinds['clock skew (+5 s)'], { operations: 3, injected: 1, violations: 1, p50Ms: 4, p99Ms: 4 });
  assert.deepEqual([summary.operations, summary.faults, summary.violations], [7, 4, 1]);
  assert.equal(lines.length, 7);
});

test('a lease a skewed client took over before its writer heard it wrote it is judged by fences, and so is the lease after', () => {
  // `c` (its clock an hour ahead, beyond maxClockSkewMs) takes over `a`'s record 2 ms after `a`
  // stamped it, before `a`'s answer came (at 6); `b` then takes it from `c` while `a` still
  // believes it holds. The fences keep the counter right: a's write is refused.
  const history = [
    { kind: 'client', client: 'a', skewMs: 5000 },
    { kind: 'client', client: 'b', skewMs: 0 },
    { kind: 'client', client: 'c', skewMs: 3_600_000 },
    { kind: 'acquired', client: 'c', name: 'n', token: 'tc', fence: 2, at: 3, heldUntil: 1003 },
    { kind: 'released', client: 'c', name: 'n', token: 'tc', at: 4 },
    { kind: 'acquired', client: 'a', name: 'n', token: 'ta', fence: 1, at: 6, heldUntil: 1001 },
    { kind: 'acquired', client: 'b', name: 'n', token: 'tb', fence: 3, at: 8, heldUntil: 1008 },
    { kind: 'write', client: 'c', resource: 'counter', token: 'tc', fence: 2, outcome: 'ok' },
    { kind: 'write', client: 'a', resource: 'counter', token: 'ta', fence: 1, outcome: 'refused' },
    { kind: 'write', client: 'b', resource: 'counter', token: 'tb', fence: 3, outcome: 'ok' },
    { kind: 'released', client: 'b', name: 'n', token: 'tb', at: 10 },
    { kind: 'released', client: 'a', name: 'n', token: 'ta', at: 11 },
    { kind: 'final', resource: 'counter', value: 2, accepted: [{ fence: 2, token: 'tc' }, { fence: 3, token: 'tb' }] },
  ];
  const judged = { ...options, staleMs: 1000 };
  assert.deepEqual(check(history, judged).violations, []);
  // Judged from the answers alone, a and c never overlap, and a's lease is counted against b's.
  assert.deepEqual(check(history, options).violations.map((v) => v.property), ['one holder at a time']);
  // Between clients whose clocks agree, the same overlap is a violation still.
  const agreeing = history.map((e) => (e.kind === 'client' && e.client === 'c' ? { ...e, skewMs: 0 } : e));
  assert.deepEqual(check(agreeing, judged).violations.map((v) => v.property).filter((p) => p === 'one holder at a time').length > 0, true);
});

test('a client that starts more turns than it keeps in flight ahead of a wait that reached the store is caught', () => {
  // a waits from 10 to 40 and its ask reaches the record at 12; b (2 turns in flight) starts
  // turns asked for at 11 (before the ask: allowed), and at 13, 15 and 17 (after it).
  const turn = (client, asked, at) => ({ kind: 'acquired', client, name: 'n', token: `${client}${at}`, fence: at, at, heldUntil: at, waitedMs: at - asked });
  const history = [
    { kind: 'client', client: 'a', skewMs: 0, inFlight: 1 },
    { kind: 'client', client: 'b', skewMs: 0, inFlight: 2 },
    { kind: 'asked', client: 'a', name: 'n', at: 12 },
    turn('b', 11, 14),
    turn('b', 13, 16),
    turn('b', 15, 18),
    turn('b', 17, 20),
    turn('a', 10, 40),
  ];
  const found = check(history, options);
  assert.deepEqual(found.violations.map((v) => [v.property, v.clients]), [['no client overtaken beyond the bound', ['a', 'b']]]);
  // Judged: a's wait; b's waits asked nothing that reached the record, so no order was promised them.
  assert.deepEqual(found.order, { judged: 1, most: 3 });
  // Within b's bound once one of those turns is gone; a wait whose ask never reached the record
  // (every write of it lost its race) is not judged.
  assert.deepEqual(properties(history.filter((e) => e.at !== 20)), []);
  assert.deepEqual(properties(history.filter((e) => e.kind !== 'asked')), []);
  // Not judged: a wait a fault came within staleMs of, or one in which a client with another clock took the name.
  const judged = (fault) => check([...history, { kind: 'fault', fault: 'latency', client: 'b', ...fault }], { ...options, staleMs: 1000 }).order.judged;
  assert.equal(judged({ from: 0, to: 5 }), 0);
  assert.equal(judged({ from: -2000, to: -1500 }), 1);
  const skewed = [{ kind: 'client', client: 'c', skewMs: 5000 }, { ...turn('c', 19, 21), heldUntil: 22 }];
  assert.deepEqual(properties([...history, ...skewed]), []);
});

test('a name taken N at a time: each slot is one name, a slot out of range and more than N holders are found', () => {
  const slot = (client, k, token, at, until, slots = 3) => [
    { kind: 'acquired', client, name: `g#${k}`, group: 'g', slots, token, fence: at + 1, at, heldUntil: at + 2000 },
    { kind: 'released', client, name: `g#${k}`, token, at: until },
  ];
  const clients = [
    { kind: 'client', client: 'a', skewMs: 0 },
    { kind: 'client', client: 'b', skewMs: 0 },
  ];
  const three = [...clients, ...slot('a', 0, 't1', 0, 10), ...slot('b', 1, 't2', 1, 10), ...slot('a', 2, 't3', 2, 10), ...slot('b', 0, 't4', 11, 20)];
  assert.deepEqual(properties(three), []);
  // A slot counted twice: b in slot 0 while a holds it — four holders at once.
  assert.deepEqual(properties([...three, ...slot('b', 0, 't5', 5, 8)]).sort(), ['at most N holders', 'one holder at a time']);
  assert.deepEqual(properties([...three.slice(0, 4), ...slot('b', 0, 't5', 5, 8)]), ['one holder at a time']);
  // A fourth holder, in a slot past N: out of range, and four at once.
  assert.deepEqual(properties([...three, ...slot('b', 3, 't6', 5, 8)]).sort(), ['at most N holders', 'slots in range']);
  // After a store fault the overlap is not counted, as for one name.
  const faulted = [...three, { kind: 'fault', fault: 'restart', from: 3, to: 4, store: true }, ...slot('b', 3, 't6', 5, 8)];
  assert.deepEqual(properties(faulted), ['slots in range']);
});

const SLOT_STALE_MS = 2000;
/** A lease in slot `k` of group `g`, taken 2 at a time: its record written at `written`, heard at `at`, released at `until`. */
const slotLease = (client, k, token, written, at, until) => [
  { kind: 'acquired', client, name: `g#${k}`, group: 'g', slots: 2, token, fence: written + 1, at, heldUntil: written + SLOT_STALE_MS },
  { kind: 'released', client, name: `g#${k}`, token, at: until },
];

test('N at a time: an answer that arrives after later holders\', its record written before a store fault that lost it, is excused as that fault\'s, as for one name', () => {
  const staleMs = SLOT_STALE_MS;
  const lease = slotLease;
  const history = [
    ...['a', 'b', 'x'].map((client) => ({ kind: 'client', client, skewMs: 0 })),
    // x takes slot 0 at 2.8 and b slot 1 at 3 (heard at 4); a's record in slot 1 was written
    // at 1, but a hears it only at 6: three holders from 6 on.
    ...lease('x', 0, 't1', 2.8, 2.8, 20),
    ...lease('b', 1, 't2', 3, 4, 20),
    ...lease('a', 1, 't3', 1, 6, 10),
  ];
  const judged = (events) => check(events, { ...options, staleMs }).violations.map((v) => v.property).sort();
  assert.deepEqual(judged(history), ['at most N holders', 'one holder at a time']);
  assert.deepEqual(judged([...history, { kind: 'fault', fault: 'restart', from: 2, to: 2.5, store: true }]), []);
  assert.deepEqual(judged([...history, { kind: 'fault', fault: 'restart', from: 0, to: 0.5, store: true }]), ['at most N holders', 'one holder at a time'], 'a fault before every record excuses nothing');
});

test('N at a time: a lease whose record a store fault lost stops counting, and the holders it overlapped still count', () => {
  const staleMs = SLOT_STALE_MS;
  const lease = slotLease;
  const history = [
    ...['a', 'b', 'x', 'y'].map((client) => ({ kind: 'client', client, skewMs: 0 })),
    // As above, a's record lost by the fault; then y takes slot 0 at 7 while x holds it:
    // x, b and y hold at once, none of them the fault's.
    ...lease('x', 0, 't1', 2.8, 2.8, 20),
    ...lease('b', 1, 't2', 3, 4, 20),
    ...lease('a', 1, 't3', 1, 6, 10),
    ...lease('y', 0, 't4', 7, 7, 8),
    { kind: 'fault', fault: 'restart', from: 2, to: 2.5, store: true },
  ];
  const violations = check(history, { ...options, staleMs }).violations;
  assert.deepEqual(violations.map((v) => v.property).sort(), ['at most N holders', 'one holder at a time']);
  assert.deepEqual(violations.find((v) => v.property === 'at most N holders').clients.sort(), ['b', 'x', 'y']);
});

test('a paced name: limit + 1 starts within its period are found, less the clocks’ allowance; a lost record lets one window’s worth more through, once per fault', () => {
  const rate = { limit: 3, periodMs: 300 };
  const judged = { ...options, staleMs: 1000 };
  const paced = (history) => check(history, judged).violations.map((v) => v.property);
  const start = (client, at) => [
    { kind: 'acquired', client, name: 'p', token: `${client}/${at}`, fence: at, at, clock: at, rate, waitedMs: 0 },
    { kind: 'ended', client, token: `${client}/${at}`, at: at + 2 },
  ];
  const clients = [
    { kind: 'client', client: 'a', skewMs: 0 },
    { kind: 'client', client: 'b', skewMs: 0 },
  ];
  // Three at once, then one each as the oldest leaves the window: within the pace.
  const within = [...clients, ...[0, 3, 6, 300, 303, 306, 600].flatMap((at, i) => start(i % 2 === 0 ? 'a' : 'b', at))];
  assert.deepEqual(paced(within), []);
  // A fourth within the period, less the allowance for clocks read a moment before the work.
  const burst = (last) => [...clients, ...[0, 3, 6].flatMap((at) => start('a', at)), ...start('b', last)];
  const fourth = burst(280);
  assert.deepEqual(paced(fourth), ['at most limit starts a period']);
  assert.deepEqual(paced(burst(295)), [], 'within the allowance');
  // Clocks apart by 50 ms shorten the window judged by as much.
  const apart = fourth.map((e) => (e.kind === 'client' && e.client === 'b' ? { ...e, skewMs: 50 } : e));
  assert.deepEqual(paced(apart), []);

  // A lost record: a, b, c before it; the next holder starts three again — excused once.
  const lost = [
    ...clients,
    ...[0, 10, 20].flatMap((at) => start('a', at)),
    { kind: 'fault', fault: 'failover', client: 'a', from: 30, to: 40, store: true },
    ...[50, 60, 70].flatMap((at) => start('b', at)),
  ];
  assert.deepEqual(paced(lost), []);
  assert.deepEqual(paced([...lost, ...start('b', 80)]), ['at most limit starts a period'], 'no more than one window’s worth');
  // Past the lease a holder across the loss may have gone on with: the pace again.
  assert.deepEqual(paced([...lost, ...[1100, 1110, 1120].flatMap((at) => start('b', at))]), []);
  assert.deepEqual(paced([...lost, ...[1100, 1110, 1120, 1130].flatMap((at) => start('b', at))]), ['at most limit starts a period'], 'and after it, the pace again');
  assert.deepEqual(paced([...lost.filter((e) => e.kind !== 'fault')]), ['at most limit starts a period'], 'no fault, no excuse');
  const later = { kind: 'fault', fault: 'failover', client: 'a', from: -1500, to: -1200, store: true };
  assert.deepEqual(paced([...lost.filter((e) => e.kind !== 'fault'), later]), ['at most limit starts a period'], 'a fault long before excuses nothing');
  // A holder that died between writes: its own fault excuses, another client's does not; a
  // fault of the store's server reaches every client.
  const died = (fault) => [...lost.filter((e) => e.kind !== 'fault'), { kind: 'fault', fault: 'killed', from: 30, to: 40, ...fault }];
  assert.deepEqual(paced(died({ client: 'a#1' })), []);
  assert.deepEqual(paced(died({ client: 'z' })), ['at most limit starts a period']);
  assert.deepEqual(paced(died({ client: 'z', everyone: true })), []);

  // Paced works are judged for overlap too: from their start until they end, or their signal aborts.
  const overlap = [...clients, ...start('a', 0), ...start('b', 1)];
  assert.deepEqual(paced(overlap), ['one holder at a time']);
  assert.deepEqual(paced(overlap.map((e) => (e.kind === 'ended' && e.client === 'a' ? { ...e, abortedAt: 0.5 } : e))), []);
  assert.deepEqual(paced(overlap.filter((e) => !(e.kind === 'ended' && e.client === 'a'))), [], 'a work that never ended (its client killed) is judged by fences');
});
