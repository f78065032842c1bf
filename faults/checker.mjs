// The fault harness's history checker: reads what clients, the resource and the nemesis
// recorded, and says which of the lock's promises a run broke. Pure: no I/O, no clock.
//
// Times are real milliseconds on one machine's shared monotonic clock (`process.hrtime` in
// every process), whatever skew a client's own `now` was given.
//
// Events (plain objects, `kind` first):
// - `client`   { client, skewMs, inFlight }        — a client, how far its `now` was moved, and
//                                                    how many turns it keeps in flight
// - `acquired` { client, name, token, fence, at, heldUntil, waitedMs, group?, slots? }
//                                                  — its acquisition answered at `at`, asked for
//                                                    `waitedMs` before; its lease ends at
//                                                    `heldUntil` (real time) unless released.
//                                                    A slot of a name taken N at a time has
//                                                    `name` `group#k`, and `group` and `slots`
//                                                    (N): each slot is judged as a name, and the
//                                                    group's holders are counted against N
//   or, a paced name's work (a serializer turn with `rate` over a store), without `heldUntil`:
//   `acquired` { client, name, token, fence, at, clock, rate: { limit, periodMs }, waitedMs }
//                                                  — its work started at `at` (`clock`: on its
//                                                    client's clock); held until its `ended`
// - `ended`    { client, token, at, abortedAt? }   — a paced work ended at `at`; its signal
//                                                    aborted at `abortedAt` (its lease or its
//                                                    deadline gone), if it did
// - `released` { client, name, token, at }         — it began releasing at `at`
// - `asked`    { client, name, at }                — its isolate's ask reached the record (a
//                                                    replace that added it answered at `at`)
// - `paused`   { client, from, to }                — SIGSTOP..SIGCONT
// - `killed`   { client, at }                      — SIGKILL
// - `failed`   { client, name, error }             — a turn that failed (LockUnavailable, a store
//                                                    error): counted, not a violation
// - `invoke`   { client, resource, token, fence }   — a fenced increment was sent; one with no
//                                                    `write` after it (its client was killed or
//                                                    disposed meanwhile) is indeterminate
// - `write`    { client, resource, token, fence, outcome: 'ok' | 'refused' | 'info', at }
//                                                  — a fenced increment, answered at `at`;
//                                                    `info`: its answer was lost, it may or may
//                                                    not have applied
// - `final`    { resource, value, accepted: [{ fence, token }, …] }
//                                                  — the resource's end state and its own log of
//                                                    the writes it accepted, in order
// - `healed`   { at }                              — every fault undone
// - `crash`    { client, detail }                  — an unhandled rejection, a crash
// - `fault`    { fault, client, from, to, store, everyone }
//                                                  — the nemesis's fault, for the table;
//                                                    `store`: a store fault, which may lose
//                                                    what the store held; `everyone`: a fault
//                                                    of the store's server, not of `client`
// - `disposed` { client, at }                      — the client's isolate was thrown away (its
//                                                    leases stay held until their `heldUntil`)
//
// A violation is `{ property, detail }`, with `at` (real time) and `clients` where it has them.
// Definitions and properties as the fault-harness issue states them: a lease is held from its
// acquisition's answer until the earlier of its release and its `heldUntil`.

/**
 * The violations of one history, and what it held; `order` says how many waits the order check
 * judged, and the most turns one client started ahead of one of them.
 */
export function check(history, { maxClockSkewMs, liveWithinMs, staleMs }) {
  const faults = [];
  const storeFaults = [];
  const asks = [];
  const violations = [];
  const clients = new Map();
  const leases = [];
  const open = new Map(); // token → lease
  const writes = new Map(); // resource → { ok, info }
  const finals = [];
  const heals = [];
  const acquisitions = [];
  const faultEvents = [];
  let failed = 0;
  for (const event of history) {
    switch (event.kind) {
      case 'client':
        clients.set(event.client, { skewMs: event.skewMs, inFlight: event.inFlight ?? 1, pauses: [], killedAt: Infinity });
        break;
      case 'acquired': {
        // A paced work's lease ends when its `ended` says.
        const lease = { ...event, until: event.heldUntil ?? event.at };
        leases.push(lease);
        open.set(event.token, lease);
        acquisitions.push(event);
        break;
      }
      case 'released': {
        const lease = open.get(event.token);
        if (lease !== undefined) lease.until = Math.min(lease.until, event.at);
        break;
      }
      case 'ended': {
        const lease = open.get(event.token);
        if (lease !== undefined) lease.until = Math.min(event.at, event.abortedAt ?? Infinity);
        break;
      }
      case 'asked':
        asks.push(event);
        break;
      case 'paused':
        clientOf(clients, event.client).pauses.push([event.from, event.to]);
        break;
      case 'killed':
        clientOf(clients, event.client).killedAt = event.at;
        break;
      case 'invoke':
      case 'write': {
        const counts = writes.get(event.resource) ?? { unanswered: new Set(), ok: 0, info: 0, answered: 0 };
        const call = `${event.client} ${event.token}`;
        if (event.kind === 'invoke') {
          counts.unanswered.add(call);
        } else {
          counts.unanswered.delete(call);
          counts.answered += 1;
        }
        if (event.outcome === 'ok') counts.ok += 1;
        else if (event.outcome === 'info') counts.info += 1;
        writes.set(event.resource, counts);
        break;
      }
      case 'final':
        finals.push(event);
        break;
      case 'healed':
        heals.push(event.at);
        break;
      case 'failed':
        failed += 1;
        break;
      case 'crash':
        violations.push({ property: 'no crash', detail: `${event.client}: ${event.detail}`, clients: [event.client] });
        break;
      case 'fault':
        faults.push([event.from, event.to]);
        faultEvents.push(event);
        if (event.store === true) storeFaults.push([event.from, event.to]);
        break;
      case 'disposed':
        break;
      default:
        violations.push({ property: 'history', detail: `unknown event kind ${JSON.stringify(event.kind)}` });
    }
  }
  for (const final of finals) {
    const { ok, info, unanswered } = writes.get(final.resource) ?? { unanswered: new Set(), ok: 0, info: 0 };
    checkResource(final, { ok, info: info + unanswered.size }, violations);
  }
  const judged = checkExclusion(leases, clients, maxClockSkewMs, staleMs, storeFaults, violations);
  checkSlots(judged, staleMs, storeFaults, violations);
  checkPace(acquisitions, clients, faultEvents, staleMs ?? 0, violations);
  checkLiveness(heals, acquisitions, clients, liveWithinMs, violations);
  const order = checkOrder(acquisitions, asks, clients, faults, staleMs ?? 0, violations);
  return { violations, order, leases: leases.length, writes: [...writes.values()].reduce((n, c) => n + c.answered, 0), failed };
}

function clientOf(clients, client) {
  let known = clients.get(client);
  if (known === undefined) {
    known = { skewMs: 0, inFlight: 1, pauses: [], killedAt: Infinity };
    clients.set(client, known);
  }
  return known;
}

/** Fences the resource accepted never decrease, each for one holder; the count is exact. */
function checkResource({ resource, value, accepted }, { ok, info }, violations) {
  const holderOf = new Map();
  let highest = -Infinity;
  for (const { fence, token } of accepted) {
    if (fence < highest) violations.push({ property: 'fences rise', detail: `${resource} accepted fence ${fence} after ${highest}` });
    highest = Math.max(highest, fence);
    const holder = holderOf.get(fence);
    if (holder !== undefined && holder !== token) {
      violations.push({ property: 'one holder per fence', detail: `${resource} accepted fence ${fence} from ${holder} and ${token}` });
    }
    holderOf.set(fence, token);
  }
  if (value < ok || value > ok + info) {
    violations.push({ property: 'nothing lost, nothing twice', detail: `${resource} holds ${value}; ${ok} increments known accepted, ${info} indeterminate` });
  }
}

/**
 * Judged leases of one name never overlap in real time. Leases are judged by fences alone when
 * their clients' clocks differ by more than `maxClockSkewMs`, or when a holder was paused while
 * holding: such a lease, and any lease it overlapped, may have been taken over rightly. For that
 * the overlap counts from the lease's record on — its stamp, `staleMs` before its `heldUntil`,
 * when that is before its answer — since a skewed client can take a record over before its
 * writer heard that it wrote it. The one overlap not counted: a lease taken while an earlier one
 * still held, with a store fault between the record written first and the other's answer —
 * the store lost what made them exclusive; the fences must still keep the resource safe.
 * Answers the judged leases.
 * @param {number | undefined} staleMs
 * @param {Array<[number, number]>} storeFaults
 */
function checkExclusion(leases, clients, maxClockSkewMs, staleMs, storeFaults, violations) {
  const paused = (lease) => clientOf(clients, lease.client).pauses.some(([from, to]) => from < lease.until && to > lease.at);
  const skewApart = (a, b) => Math.abs(clientOf(clients, a.client).skewMs - clientOf(clients, b.client).skewMs) > maxClockSkewMs;
  const written = (lease) => writtenAt(staleMs, lease);
  const judgedLeases = [];
  const byName = new Map();
  for (const lease of leases) {
    if (lease.until <= lease.at) continue;
    const list = byName.get(lease.name) ?? [];
    list.push(lease);
    byName.set(lease.name, list);
  }
  for (const [name, all] of byName) {
    const outside = new Set(all.filter(paused));
    const byRecord = [...all].sort((a, b) => written(a) - written(b));
    for (let i = 0; i < byRecord.length; i++) {
      for (let j = i + 1; j < byRecord.length && written(byRecord[j]) < byRecord[i].until; j++) {
        const [a, b] = [byRecord[i], byRecord[j]];
        if (outside.has(a) || outside.has(b) || skewApart(a, b)) {
          outside.add(a);
          outside.add(b);
        }
      }
    }
    all.sort((a, b) => a.at - b.at);
    let holding;
    for (const lease of all.filter((judged) => !outside.has(judged))) {
      judgedLeases.push(lease);
      if (holding !== undefined && lease.at < holding.until && !lostBetween(storeFaults, staleMs, holding, lease)) {
        violations.push({
          property: 'one holder at a time',
          at: lease.at,
          clients: [lease.client, holding.client],
          detail: `${name}: ${lease.client} (fence ${lease.fence}) from ${lease.at.toFixed(1)} while ${holding.client} (fence ${holding.fence}) held it until ${holding.until.toFixed(1)}`,
        });
      }
      if (holding === undefined || lease.until > holding.until) holding = lease;
    }
  }
  return judgedLeases;
}

/** When a lease's record was written: its stamp, `staleMs` before its `heldUntil`, if before its answer. */
const writtenAt = (staleMs, lease) => (staleMs === undefined || lease.heldUntil === undefined ? lease.at : Math.min(lease.at, lease.heldUntil - staleMs));

/**
 * Whether a store fault came after the record of `a` and `b` written first, before the other's
 * answer: under load an answer can arrive after a later holder's, its record written before a
 * fault that lost it.
 */
function lostBetween(storeFaults, staleMs, a, b) {
  const [earlier, later] = writtenAt(staleMs, a) <= writtenAt(staleMs, b) ? [a, b] : [b, a];
  return storeFaults.some(([from, to]) => from < later.at && to > writtenAt(staleMs, earlier));
}

/**
 * Names taken N at a time: every slot in range, and — among the judged leases — never more
 * than N holders of one group at once (a store fault between two leases excuses their overlap,
 * as for one name).
 */
function checkSlots(judged, staleMs, storeFaults, violations) {
  const groups = new Map();
  for (const lease of judged) {
    if (lease.group === undefined) continue;
    const slot = Number(lease.name.slice(lease.group.length + 1));
    if (!(lease.name.startsWith(`${lease.group}#`) && Number.isInteger(slot) && slot >= 0 && slot < lease.slots)) {
      violations.push({ property: 'slots in range', at: lease.at, clients: [lease.client], detail: `${lease.name}: not a slot of ${lease.group}, taken ${lease.slots} at a time` });
    }
    groups.set(lease.group, [...(groups.get(lease.group) ?? []), lease]);
  }
  for (const [group, all] of groups) {
    all.sort((a, b) => a.at - b.at);
    // Of two leases a store fault came between, the one whose record was written first is the
    // one the fault lost: that one stops counting, the other still holds.
    const lostFirst = (a, b) => lostBetween(storeFaults, staleMs, a, b) && writtenAt(staleMs, a) <= writtenAt(staleMs, b);
    let active = [];
    for (const lease of all) {
      active = active.filter((other) => other.until > lease.at && !lostFirst(other, lease));
      if (active.some((other) => lostFirst(lease, other))) continue;
      active.push(lease);
      if (active.length > lease.slots) {
        violations.push({
          property: 'at most N holders',
          at: lease.at,
          clients: active.map((other) => other.client),
          detail: `${group}: ${active.length} holders at ${lease.at.toFixed(1)}, taken ${lease.slots} at a time (${active.map((other) => `${other.client} in ${other.name}`).join(', ')})`,
        });
      }
    }
  }
}

/**
 * How much shorter than `periodMs` a window of starts is judged, beyond the spread of its
 * clients' clocks: the serializer stamps a start on its wall clock, whose reads fall up to 1 ms
 * short, a moment before its work reads the shared clock — a moment that a busy machine can
 * stretch to milliseconds. A pace that lets `limit + 1` through starts them far closer.
 */
const PACE_GRAIN_MS = 10;

/**
 * A paced name's starts (`acquired` with `rate`): no `limit + 1` of them within `periodMs`, less
 * the clocks' allowance — the spread of the skews of the clients that started in the window,
 * and PACE_GRAIN_MS. Save what lost starts let through: a fault that may have lost some lets
 * one window's worth more through (`limit` starts) in any window it came in. A fault may have lost starts
 * if it is a store fault (the record lost), a fault of the store's server, or a fault of a client
 * that started in the window (a holder that died, or was cut off or paused past its lease,
 * between writes); it came in the window if it began before the window's last start and ended
 * at most `staleMs` before its first (a holder across a lost record goes on, its starts in
 * memory, until its lease runs out).
 */
function checkPace(acquisitions, clients, faultEvents, staleMs, violations) {
  const base = (client) => String(client).split('#')[0];
  const byName = new Map();
  for (const a of acquisitions) if (a.rate !== undefined) byName.set(a.name, [...(byName.get(a.name) ?? []), a]);
  for (const [name, starts] of byName) {
    starts.sort((a, b) => a.at - b.at);
    for (let i = 0, reported = -1; i < starts.length; i++) {
      const { limit, periodMs } = starts[i].rate;
      // The longest window from this start that the pace bounds.
      let j = i;
      const skews = [clientOf(clients, starts[i].client).skewMs];
      for (let k = i + 1; k < starts.length; k++) {
        const spread = Math.max(...skews, clientOf(clients, starts[k].client).skewMs) - Math.min(...skews, clientOf(clients, starts[k].client).skewMs);
        if (starts[k].at - starts[i].at >= periodMs - spread - PACE_GRAIN_MS) break;
        skews.push(clientOf(clients, starts[k].client).skewMs);
        j = k;
      }
      const count = j - i + 1;
      if (count <= limit || j <= reported) continue; // one report per run of windows over the pace
      const window = starts.slice(i, j + 1);
      const starters = new Set(window.map((start) => base(start.client)));
      const excusing = faultEvents.filter((f) => f.from < starts[j].at && f.to > starts[i].at - staleMs && (f.store === true || f.everyone === true || starters.has(base(f.client))));
      if (count <= limit * (1 + excusing.length)) continue;
      reported = j;
      violations.push({
        property: 'at most limit starts a period',
        at: starts[j].at,
        clients: [...new Set(window.map((start) => start.client))],
        detail: `${name}: ${count} starts within ${(starts[j].at - starts[i].at).toFixed(1)} ms (${window.map((start) => `${start.client} ${start.at.toFixed(1)}`).join(', ')}), at most ${limit} a ${periodMs} ms period${excusing.length > 0 ? `, ${limit} more for each of ${excusing.length} faults that may have lost starts` : ''}`,
      });
    }
  }
}

/** After each heal, every client still alive acquires within the bound. */
function checkLiveness(heals, acquisitions, clients, liveWithinMs, violations) {
  for (const healedAt of heals) {
    for (const [client, { killedAt }] of clients) {
      if (killedAt <= healedAt + liveWithinMs) continue;
      const served = acquisitions.some((a) => a.client === client && a.at >= healedAt && a.at <= healedAt + liveWithinMs);
      if (!served) violations.push({ property: 'live after healing', at: healedAt, clients: [client], detail: `${client} acquired nothing within ${liveWithinMs} ms of the heal at ${healedAt.toFixed(1)}` });
    }
  }
}

/**
 * No client is overtaken beyond the bound of "Turns round isolates": a client's turns asked
 * for after another's wait reached the store — the wait's first ask in the record — start
 * before that wait ends at most once per turn the client keeps in flight: the batch whose
 * hand-off raced the ask. Judged only where the lock promises an order: in waits whose ask
 * reached the record (the order is the asks'; a wait whose every ask write lost its race — a
 * holder taking the name again within two of the waiter's round trips, seen once on Postgres
 * with 4 turns in flight — is promised none, and is a known limit of an ask by compare-and-set),
 * that no fault came within `staleMs` of, between clients whose clocks agree (an ask lapses on
 * its asker's clock, an offer runs on its releaser's), and in which no client with another clock
 * took the name (its take may drop the asks it reads as lapsed).
 */
function checkOrder(acquisitions, asks, clients, faults, staleMs, violations) {
  let judged = 0;
  let most = 0; // the most turns one client started ahead of one judged wait
  const skewOf = (client) => clientOf(clients, client).skewMs;
  const faulty = (from, to) => faults.some(([start, end]) => start < to && end + staleMs > from);
  const asksOf = new Map(); // `${client} ${name}` → its asks' times, in order
  for (const { client, name, at } of asks) asksOf.set(`${client} ${name}`, [...(asksOf.get(`${client} ${name}`) ?? []), at]);
  const byName = new Map();
  for (const a of acquisitions) {
    if (a.waitedMs === undefined || a.group !== undefined) continue; // a semaphore's waiter waits for every slot
    byName.set(a.name, [...(byName.get(a.name) ?? []), { ...a, asked: a.at - a.waitedMs }]);
  }
  for (const [name, all] of byName) {
    all.sort((a, b) => a.at - b.at);
    for (const [i, wait] of all.entries()) {
      if (faulty(wait.asked, wait.at)) continue;
      const during = [];
      for (let j = i - 1; j >= 0 && all[j].at > wait.asked; j--) if (all[j].client !== wait.client && all[j].at < wait.at) during.push(all[j]);
      if (during.some((other) => skewOf(other.client) !== skewOf(wait.client))) continue;
      const reached = (asksOf.get(`${wait.client} ${name}`) ?? []).find((at) => at >= wait.asked && at <= wait.at);
      if (reached === undefined) continue;
      judged += 1;
      const overtakes = new Map();
      for (const other of during) if (other.asked > reached) overtakes.set(other.client, (overtakes.get(other.client) ?? 0) + 1);
      for (const [client, count] of overtakes) {
        most = Math.max(most, count);
        const bound = clientOf(clients, client).inFlight;
        if (count <= bound) continue;
        violations.push({
          property: 'no client overtaken beyond the bound',
          at: wait.at,
          clients: [wait.client, client],
          detail: `${name}: ${client} started ${count} turns asked for after ${wait.client}'s wait reached the store (bound ${bound}), while it waited ${wait.waitedMs.toFixed(1)} ms until ${wait.at.toFixed(1)}`,
        });
      }
    }
  }
  return { judged, most };
}
