// The shared decision table (tests/decisions.json), run by the package's JS in both modes:
// acquireLock, withLock and a serializer over a store whose answers each case scripts, on
// mocked timers moved 1 ms at a time. The Rust front end runs the same table
// (tests/decisions.rs); a rule decided in one front end only fails one of the two.
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { forEachMode } from './modes.mjs';

const table = JSON.parse(readFileSync(new URL('../decisions.json', import.meta.url), 'utf8'));

/** Lets every pending reaction run (setImmediate is not mocked). */
const flush = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store whose answers a case scripts: it fails the calls it names (by number, from 1) and logs each call. */
class Scripted {
  #records = new Map();
  #versions = 0;
  #calls = 0;

  constructor(log, fail) {
    this.log = log;
    this.fail = new Set(fail);
  }

  put(key, value) {
    const version = String(++this.#versions);
    this.#records.set(key, { value, version });
    return version;
  }

  #failing() {
    this.#calls += 1;
    return this.fail.has(this.#calls);
  }

  #written(method, value, answer) {
    const record = JSON.parse(value);
    this.log(`${method} ${record.state} f${record.fence} → ${answer}`);
  }

  async create(key, value) {
    if (this.#failing()) {
      this.#written('create', value, 'fail');
      throw new Error('injected failure');
    }
    const version = this.#records.has(key) ? null : this.put(key, value);
    this.#written('create', value, version === null ? 'none' : 'ok');
    return version;
  }

  async read(key) {
    const failing = this.#failing();
    const found = this.#records.get(key);
    this.log(`read → ${failing ? 'fail' : found ? 'ok' : 'none'}`);
    if (failing) throw new Error('injected failure');
    return found === undefined ? null : { ...found };
  }

  async replace(key, version, value) {
    if (this.#failing()) {
      this.#written('replace', value, 'fail');
      throw new Error('injected failure');
    }
    const next = this.#records.get(key)?.version === version ? this.put(key, value) : null;
    this.#written('replace', value, next === null ? 'none' : 'ok');
    return next;
  }
}

const record = (state, token, fence, at) => JSON.stringify({ keyturn: 1, state, token, fence, at });

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
  const { staleMs = 2000, waitMs = 100, timeoutMs = 30000 } = scenario.options ?? {};
  const script = scenario.store ?? {};
  const store = new Scripted(say, script.fail ?? []);
  for (const [name, seeded] of Object.entries(script.records ?? {})) store.put(name, record(seeded.state, 'someone', seeded.fence, seeded.at));
  const serialize = mode.createKeyedSerializer({ store, staleMs, timeoutMs });
  const lockOptions = { waitMs, staleMs };
  for (let t = 0; t <= scenario.until; t++) {
    for (const steal of script.steals ?? []) if (steal.at === t) store.put(steal.name, record('held', 'thief', 99, t));
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
            said(`held f${lock.fence}`);
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
              said(`held f${lock.fence}`);
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
            said(`runs f${turn.fence}`);
            signal.addEventListener('abort', () => isLeaseLost(signal.reason) && said('lease lost'));
            await (action.hang ? new Promise(() => {}) : sleep(action.ms));
          }),
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
  const { started, timedOut, aborted } = serialize.stats();
  return { events: group(events.filter((event) => !ignore.some((kind) => event.split(' ')[1] === kind))), stats: { started, timedOut, aborted } };
}

forEachMode((mode) => {
  for (const scenario of table.cases) {
    test(scenario.name, async () => {
      mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
      const realNow = performance.now;
      performance.now = () => Date.now();
      try {
        const { events, stats } = await runCase(mode, scenario);
        assert.deepEqual(events, group(scenario.expect));
        if (scenario.stats !== undefined) assert.deepEqual(stats, scenario.stats);
      } finally {
        mock.timers.reset();
        performance.now = realNow;
      }
    });
  }
});
