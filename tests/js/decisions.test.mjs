// The shared decision table (tests/decisions.json), run by the package's JS in both modes:
// acquireLock, withLock and a serializer over a store whose answers each case scripts, on
// mocked timers moved 1 ms at a time. The Rust front end runs the same table
// (tests/decisions.rs); a rule decided in one front end only fails one of the two.
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { LOCK_STALE_MS } from 'keyturn';

import { forEachMode } from './modes.mjs';

const table = JSON.parse(readFileSync(new URL('../decisions.json', import.meta.url), 'utf8'));

/** Lets every pending reaction run (setImmediate is not mocked). */
const flush = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A store whose answers a case scripts: the calls it names (by number, from 1) fail (`fail`),
 * apply and then fail (`lose`: the answer was lost), or never answer (`hang`); versions are
 * counters, or the value itself (`versions: 'values'`). With `changed: true` it has `changed`
 * too, answered at the write that changes the record. It logs each call, with the record
 * written (its asks, and its `at` and `lease` too with `detail`).
 */
class Scripted {
  #records = new Map();
  #versions = 0;
  #calls = 0;
  /** @type {Set<() => void>} the `changed` calls waiting, each told of every write */
  #watchers = new Set();

  constructor(log, script, detail) {
    this.log = log;
    this.fail = new Set(script.fail ?? []);
    this.lose = new Set(script.lose ?? []);
    this.hang = new Set(script.hang ?? []);
    this.valuesAreVersions = script.versions === 'values';
    this.detail = detail;
    if (script.changed === true) this.changed = (key, version, ms) => this.#changed(key, version, ms);
  }

  put(key, value) {
    const version = this.valuesAreVersions ? value : String(++this.#versions);
    this.#records.set(key, { value, version });
    for (const tell of [...this.#watchers]) tell();
    return version;
  }

  /** The record under `key` as another isolate rewrote it: `change` of its fields, kept otherwise (null: lost). */
  rewrite(key, change) {
    const changed = change(JSON.parse(this.#records.get(key).value));
    if (changed !== null) return void this.put(key, JSON.stringify(changed));
    this.#records.delete(key);
    for (const tell of [...this.#watchers]) tell();
  }

  #changed(key, version, ms) {
    const fate = this.#fate();
    this.log(fate === 'answer' ? 'changed' : `changed → ${fate === 'hang' ? 'hang' : 'fail'}`);
    if (fate === 'hang') return new Promise(() => {});
    if (fate !== 'answer') return Promise.reject(new Error('injected failure'));
    const moved = () => (this.#records.get(key)?.version ?? null) !== version;
    return new Promise((resolve) => {
      if (moved()) return resolve(true);
      const tell = () => {
        if (!moved()) return;
        this.#watchers.delete(tell);
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#watchers.delete(tell);
        resolve(false);
      }, ms);
      this.#watchers.add(tell);
    });
  }

  /** The next call's fate: 'answer', 'fail', 'lose' or 'hang'. */
  #fate() {
    this.#calls += 1;
    for (const fate of ['fail', 'lose', 'hang']) if (this[fate].has(this.#calls)) return fate;
    return 'answer';
  }

  #written(method, value, answer) {
    const record = JSON.parse(value);
    let line = `${method} ${record.state} f${record.fence}`;
    if (record.n !== undefined) line += ` n${record.n}`;
    if (record.asks !== undefined) line += ` asks ${record.asks.split(',').length}`;
    if (record.starts !== undefined) line += ` starts ${record.starts}`;
    if (this.detail) line += ` @${record.at}${record.lease === undefined ? '' : ` lease ${record.lease}`}`;
    this.log(`${line} → ${answer}`);
  }

  /** A write's end as its fate says: `write()` applies it (a new version, or null refused). */
  async #writing(method, value, write) {
    const fate = this.#fate();
    if (fate === 'fail') {
      this.#written(method, value, 'fail');
      throw new Error('injected failure');
    }
    if (fate === 'hang') {
      this.#written(method, value, 'hang');
      return new Promise(() => {});
    }
    const version = write();
    if (fate === 'lose') {
      this.#written(method, value, version === null ? 'none, lost' : 'lost');
      throw new Error('injected failure');
    }
    this.#written(method, value, version === null ? 'none' : 'ok');
    return version;
  }

  create(key, value) {
    return this.#writing(inSlot('create', key), value, () => (this.#records.has(key) ? null : this.put(key, value)));
  }

  async read(key) {
    const fate = this.#fate();
    const found = this.#records.get(key);
    this.log(`${inSlot('read', key)} → ${fate === 'hang' ? 'hang' : fate !== 'answer' ? 'fail' : found ? 'ok' : 'none'}`);
    if (fate === 'hang') return new Promise(() => {});
    if (fate !== 'answer') throw new Error('injected failure');
    return found === undefined ? null : { ...found };
  }

  replace(key, version, value) {
    return this.#writing(inSlot('replace', key), value, () => (this.#records.get(key)?.version === version ? this.put(key, value) : null));
  }
}

const record = (state, token, fence, at, lease, asks, n, starts) => JSON.stringify({ keyturn: 1, state, token, fence, at, lease, asks, starts, n });

/**
 * A store call's method as the log shows it: with `s<k>` for the record of slot k above 0.
 * @param {string} method
 * @param {string} key
 */
const inSlot = (method, key) => (key.startsWith('keyturn:slot:') ? `${method} s${key.split(':')[2]}` : method);

/** Another isolate's ask, as it adds itself to a record's queue: its id, waiting for good. */
const OTHER_ASK = `${'e'.repeat(16)}:9999999999`;

/**
 * What another isolate does to a record at a case's time (`store.others`): `ask` adds its ask,
 * keeping every other field; `free` lets go of a held record (its fence and asks kept); `lose`
 * is the store losing it (a restart without persistence, an eviction).
 */
const others = {
  ask: (found) => ({ ...found, asks: found.asks === undefined ? OTHER_ASK : `${found.asks},${OTHER_ASK}` }),
  free: (found, t) => ({ keyturn: 1, state: 'free', token: '', fence: found.fence, at: t, asks: found.asks, starts: found.starts, n: found.n }),
  lose: () => null,
};

/** What `make` answers, or `undefined` if it refused its options with a RangeError. */
function refusedOrNot(make) {
  try {
    return make();
  } catch (error) {
    if (error instanceof RangeError) return undefined;
    throw error;
  }
}

/** Events grouped by their millisecond, each group sorted: order within one millisecond is each front end's own. */
function group(events) {
  const groups = {};
  for (const event of events) (groups[event.split(' ')[0]] ??= []).push(event);
  for (const t of Object.keys(groups)) groups[t].sort();
  return groups;
}

const isLeaseLost = (reason) => String(reason?.message).includes('lease');

async function runCase(mode, scenario) {
  const events = [];
  const at = () => Date.now();
  const say = (line) => events.push(`${at()} ${line}`);
  const { staleMs = 2000, waitMs = 100, timeoutMs = 30000, maxClockSkewMs, storeTimeoutMs, concurrency = 1, rate } = scenario.options ?? {};
  const script = scenario.store ?? {};
  const store = new Scripted(say, script, scenario.detail === true);
  for (const [name, seeded] of Object.entries(script.records ?? {})) store.put(name, record(seeded.state, 'someone', seeded.fence, seeded.at, seeded.lease, seeded.asks, seeded.n, seeded.starts));
  // (A case about a refused lock option has no serializer: it would be refused too.)
  const serialize = refusedOrNot(() => mode.createKeyedSerializer({ store, staleMs, timeoutMs, maxClockSkewMs, storeTimeoutMs, concurrency, rate }));
  // A slot is logged only where a name has more than one.
  const slotted = (slot) => (concurrency > 1 ? `s${slot} ` : '');
  // This isolate's wall clock, as the case sets it: `ahead` of the monotonic one, or `frozen` there.
  const { ahead = 0, frozen = false } = scenario.clock ?? {};
  const now = scenario.clock === undefined ? undefined : frozen ? () => ahead : () => Date.now() + ahead;
  const lockOptions = { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, concurrency, now };
  for (let t = 0; t <= scenario.until; t++) {
    for (const steal of script.steals ?? []) if (steal.at === t) store.put(steal.name, record('held', 'thief', 99, t, LOCK_STALE_MS));
    for (const other of script.others ?? []) if (other.at === t) store.rewrite(other.name, (found) => others[other.does](found, t));
    scenario.actions.forEach((action, i) => {
      if (action.at !== t) return;
      const said = (line) => say(`${i} ${line}`);
      const settled = (promise) =>
        promise.then(
          () => said('→ ok'),
          (error) => said(`→ ${error.name}`),
        );
      if (action.acquire !== undefined) {
        mode.acquireLock(store, action.acquire, lockOptions).then(
          async (lock) => {
            if (lock === undefined) return said('→ undefined');
            said(`held ${slotted(lock.slot)}f${lock.fence}`);
            await sleep(action.ms);
            await lock.release();
          },
          (error) => said(`→ ${error.name}`),
        );
      } else if (action.withLock !== undefined) {
        settled(
          mode.withLock(
            store,
            action.withLock,
            async (lock) => {
              said(`held ${slotted(lock.slot)}f${lock.fence}`);
              let running = true;
              lock.signal.addEventListener('abort', () => running && said('lease lost'));
              await sleep(action.ms);
              running = false;
            },
            lockOptions,
          ),
        );
      } else if (action.serialize !== undefined) {
        settled(
          serialize(action.serialize, async (signal, turn) => {
            said(`runs ${slotted(turn.slot)}f${turn.fence}`);
            signal.addEventListener('abort', () => isLeaseLost(signal.reason) && said('lease lost'));
            await (action.hang ? new Promise(() => {}) : sleep(action.ms));
          }, { ifAvailable: action.ifAvailable === true }),
        );
      } else {
        throw new Error(`unknown action ${JSON.stringify(action)}`);
      }
    });
    await flush();
    mock.timers.tick(1);
    await flush();
  }
  const ignore = scenario.ignore ?? [];
  return {
    events: group(events.filter((event) => !ignore.some((kind) => event.split(' ')[1] === kind))),
    counters: { stats: serialize?.stats(), lockStats: mode.lockStats(store) },
  };
}

forEachMode((mode) => {
  for (const scenario of table.cases) {
    test(scenario.name, async () => {
      mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
      const realNow = performance.now;
      performance.now = () => Date.now();
      try {
        const { events, counters } = await runCase(mode, scenario);
        assert.deepEqual(events, group(scenario.expect));
        for (const kind of ['stats', 'lockStats']) {
          const expected = scenario[kind];
          if (expected === undefined) continue;
          // The counters the case names, as this front end has them.
          const got = Object.fromEntries(Object.keys(expected).map((name) => [name, counters[kind][name]]));
          assert.deepEqual(got, expected, kind);
        }
      } finally {
        mock.timers.reset();
        performance.now = realNow;
      }
    });
  }
});
