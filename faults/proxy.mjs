// The fault harness's TCP proxy, one per client, in front of a server on loopback (redis-server):
// the nemesis's hand on that client's connection. Everything it forwards it can delay, and it
// can lose an answer the server already sent (the write applied, its answer lost), stall the
// client's connections and then reset them (a partition longer than a lease), or send them to
// another server (a failover).
import { createServer, connect } from 'node:net';

/** A proxy from a loopback port of its own to `target` (`{ host, port }`). */
export class FaultProxy {
  constructor(target) {
    this.target = target;
    this.server = createServer((client) => this.accept(client));
    this.pairs = new Set(); // [client, upstream] sockets of each live connection
    this.latency = [0, 0]; // ms added to each chunk, drawn in [min, max]
    this.dropReplies = 0; // answers still to lose: the connection closes instead
    this.stalledUntil = 0; // while Date.now() is before it, nothing passes
    this.doomed = new WeakSet(); // connections a stall will reset: nothing of theirs passes again
    this.random = Math.random;
    this.counts = { connections: 0, dropped: 0, stalls: 0 };
  }

  /** Listens on 127.0.0.1; resolves with the port. */
  listen() {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve(this.server.address().port));
    });
  }

  /** Each chunk either way waits `min`..`max` ms (0, 0: none). */
  setLatency(min, max = min) {
    this.latency = [min, max];
  }

  /** The next `count` answers from the server are lost: each closes its connection instead. */
  loseAnswers(count = 1) {
    this.dropReplies += count;
  }

  /** For `ms`, nothing passes either way; then every connection open now is reset. */
  blackhole(ms) {
    this.counts.stalls += 1;
    this.stalledUntil = Date.now() + ms;
    const stalled = [...this.pairs];
    for (const pair of stalled) this.doomed.add(pair);
    return new Promise((resolve) => {
      setTimeout(() => {
        for (const pair of stalled) for (const socket of pair) socket.resetAndDestroy?.() ?? socket.destroy();
        resolve();
      }, ms);
    });
  }

  /** From now on connects to `target`; every connection open now is reset (a failover). */
  retarget(target) {
    this.target = target;
    for (const pair of this.pairs) for (const socket of pair) socket.resetAndDestroy?.() ?? socket.destroy();
  }

  /** Stops listening and closes every connection. */
  close() {
    for (const pair of this.pairs) for (const socket of pair) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  accept(client) {
    this.counts.connections += 1;
    const upstream = connect(this.target);
    const pair = [client, upstream];
    this.pairs.add(pair);
    const end = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    this.pipe(client, upstream, false, pair);
    this.pipe(upstream, client, true, pair);
  }

  /** Forwards `from` to `to` in order, each chunk after its latency; `answers`: server → client. */
  pipe(from, to, answers, pair) {
    let chain = Promise.resolve();
    from.on('data', (chunk) => {
      const delay = this.delay();
      chain = chain.then(async () => {
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
        while (Date.now() < this.stalledUntil) await new Promise((resolve) => setTimeout(resolve, this.stalledUntil - Date.now()));
        // A connection the stall resets gets nothing through, even in the millisecond its reset
        // and the end of the stall share.
        if (!this.pairs.has(pair) || this.doomed.has(pair)) return;
        if (answers && this.dropReplies > 0) {
          this.dropReplies -= 1;
          this.counts.dropped += 1;
          for (const socket of pair) socket.destroy();
          return;
        }
        to.write(chunk);
      });
    });
  }

  delay() {
    const [min, max] = this.latency;
    return min + (max - min) * this.random();
  }
}

/**
 * Each client slot's proxies, one to the lock records' server and one to the counters' (a
 * reborn client keeps its slot's), made at its first client: what an engine over servers on
 * loopback ports gives its clients.
 */
export class ClientProxies {
  /**
   * @param {string} clientScript the client process an engine starts
   * @param {() => object} locksTarget where the lock records' server is now
   * @param {() => object} countersTarget where the counters' server is
   */
  constructor(clientScript, locksTarget, countersTarget) {
    this.clientScript = clientScript;
    this.locksTarget = locksTarget;
    this.countersTarget = countersTarget;
    this.slots = [];
  }

  /** The engine's `client(slot)`: the script, and the ports its config names. */
  async client(slot) {
    if (this.slots[slot] === undefined) {
      const proxies = { locks: new FaultProxy(this.locksTarget()), counters: new FaultProxy(this.countersTarget()) };
      this.slots[slot] = proxies;
      proxies.ports = { port: await proxies.locks.listen(), countersPort: await proxies.counters.listen() };
    }
    return { script: this.clientScript, config: this.slots[slot].ports };
  }

  /** A slot's proxies. */
  of(slot) {
    return [this.slots[slot].locks, this.slots[slot].counters];
  }

  /** Every slot's proxies. */
  all() {
    return this.slots.flatMap((_, slot) => this.of(slot));
  }

  /** The lock records' server moved (a failover): every slot's proxy to it goes there. */
  retargetLocks() {
    for (const { locks } of this.slots) locks.retarget(this.locksTarget());
  }

  async close() {
    for (const proxy of this.all()) await proxy.close();
  }
}
