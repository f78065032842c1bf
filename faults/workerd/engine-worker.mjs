// The Durable Objects engine of the fault harness, run by faults/durable-objects-engine.mjs in its own
// workerd process and reached by every client process through Miniflare's dev registry: the
// lock records (`LockDurableObject`, keyturn's) and the fenced counters (`FencedCounter`), one
// object per name. `GET /final?resource=…` reads a counter's end state.
import { DurableObject } from 'cloudflare:workers';

export { LockDurableObject } from '../../pkg/workerd.js';

/** A counter whose increment is refused below the highest fence it accepted; it logs what it accepts. */
export class FencedCounter extends DurableObject {
  #sql;
  constructor(ctx, env) {
    super(ctx, env);
    this.#sql = ctx.storage.sql;
    this.#sql.exec('CREATE TABLE IF NOT EXISTS accepted (seq INTEGER PRIMARY KEY AUTOINCREMENT, fence INTEGER NOT NULL, token TEXT NOT NULL)');
  }

  /** One synchronous transaction: nothing awaits between its read and its write. */
  increment(fence, token) {
    const highest = this.#sql.exec('SELECT max(fence) AS fence FROM accepted').one().fence ?? -1;
    if (fence < highest) return false;
    this.#sql.exec('INSERT INTO accepted (fence, token) VALUES (?, ?)', fence, token);
    return true;
  }

  final() {
    const accepted = this.#sql.exec('SELECT fence, token FROM accepted ORDER BY seq').toArray();
    return { value: accepted.length, accepted: accepted.map(({ fence, token }) => ({ fence, token })) };
  }
}

export default {
  async fetch(request, env) {
    const resource = new URL(request.url).searchParams.get('resource');
    return Response.json(await env.COUNTERS.get(env.COUNTERS.idFromName(resource)).final());
  },
};
