// The cycles bench/stores-sqlite.mjs times, in whatever runtime runs them (Node, workerd): over
// one query function, an uncontended acquire + release through SqliteStore, and its floor — the
// same two statements the cycle's CASes issue (the store's UPDATE … RETURNING, a record of
// keyturn's length) called directly, each answer checked as the store checks it. Alternating
// cycle by cycle, the order swapped each time; the first tenth of each is untimed. Answers the
// medians and the means, in µs, and the store calls per keyturn cycle.

// The store's own statements, as SqliteStore writes them for the default table.
const REPLACE = 'UPDATE "keyturn_locks" SET "value" = ?, "version" = ? WHERE "key" = ? AND "version" = ? RETURNING "version"';

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;
const hex = () => crypto.randomUUID().replaceAll('-', '');

/**
 * @param {(sql: string, params: string[]) => unknown} query
 * @param {{ SqliteStore: Function, acquireLock: Function, lockStats: Function }} keyturn
 * @param {number} rounds
 */
export async function cycles(query, { SqliteStore, acquireLock, lockStats }, rounds) {
  const store = new SqliteStore(query);
  await store.setup();
  const name = `bench-${hex()}`;
  const keyturnCycle = async () => {
    const lock = await acquireLock(store, name);
    await lock.release();
  };
  // The floor's record: created once, then taken and freed by CAS, as keyturn's cycle does it.
  const floorName = `floor-${hex()}`;
  let version = hex();
  let fence = Date.now() * 1000;
  await query('INSERT INTO "keyturn_locks" ("key", "value", "version") VALUES (?, ?, ?)', [floorName, '{}', version]);
  const cas = async (value) => {
    const next = hex();
    const rows = await query(REPLACE, [value, next, floorName, version]);
    if (rows.length !== 1 || rows[0].version !== next) throw new Error('uncontended CAS failed');
    version = next;
  };
  const floorCycle = async () => {
    fence += 1;
    await cas(`{"keyturn":1,"state":"held","token":"${hex()}","fence":${fence},"at":${Date.now()},"lease":2000}`);
    await cas(`{"keyturn":1,"state":"free","token":"","fence":${fence},"at":${Date.now()}}`);
  };
  const keyturnTimes = [];
  const floorTimes = [];
  const warm = Math.ceil(rounds / 10);
  await keyturnCycle(); // the first creates the record; every later cycle is two CASes
  const callsBefore = lockStats(store).storeCalls;
  for (let i = 0; i < warm + rounds; i++) {
    const pair = i % 2 === 0 ? [[keyturnCycle, keyturnTimes], [floorCycle, floorTimes]] : [[floorCycle, floorTimes], [keyturnCycle, keyturnTimes]];
    for (const [cycle, times] of pair) {
      const started = performance.now();
      await cycle();
      if (i >= warm) times.push(performance.now() - started);
    }
  }
  return {
    rounds,
    keyturnUs: median(keyturnTimes) * 1000,
    floorUs: median(floorTimes) * 1000,
    // workerd's clock moves in whole milliseconds, and only across I/O: there the mean says more.
    keyturnMeanUs: mean(keyturnTimes) * 1000,
    floorMeanUs: mean(floorTimes) * 1000,
    calls: (lockStats(store).storeCalls - callsBefore) / (warm + rounds),
  };
}
