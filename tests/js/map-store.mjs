// A lock store over a Map, with exact CAS, that can lag and fail: the lock tests' store.

// The global `setTimeout`, looked up at each lag: on a test's mocked time (support.mjs's
// onMockedTime) the lag is mocked too.
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A store over a Map, with exact CAS, that can lag and fail. Several of these over one `records`
 * map behave like several isolates sharing one store: each store object gets its own manager.
 */
export class MapStore {
  constructor({ records = new Map(), lagMs = 0, failRate = 0, random = Math.random } = {}) {
    Object.assign(this, { records, lagMs, failRate, random });
    this.calls = 0;
    this.failures = 0;
  }
  async weather(mayFail = true) {
    this.calls += 1;
    if (this.lagMs) await sleep(Math.floor(this.random() * this.lagMs));
    if (mayFail && this.random() < this.failRate) {
      this.failures += 1;
      throw new Error('injected failure');
    }
  }
  next() {
    this.records.version = (this.records.version ?? 0) + 1;
    return String(this.records.version);
  }
  async create(key, value) {
    await this.weather();
    if (this.records.has(key)) return null;
    const version = this.next();
    this.records.set(key, { value, version });
    return version;
  }
  async read(key) {
    await this.weather();
    const record = this.records.get(key);
    return record ? { ...record } : null;
  }
  async replace(key, version, value) {
    await this.weather();
    if (this.records.get(key)?.version !== version) return null;
    const next = this.next();
    this.records.set(key, { value, version: next });
    return next;
  }
}

export const record = (store, key) => JSON.parse(store.records.get(key).value);
