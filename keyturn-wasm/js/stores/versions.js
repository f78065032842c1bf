// The versions of a store that chooses its own (Redis, Postgres, SQLite, DynamoDB): this store
// object's random 64-bit id and its count of writes. No version repeats — not after a record is
// deleted and written again, as a counter kept in the record would (a holder of the old
// record's version could then replace the new one) — and no crypto call per write. The id is
// drawn on the first write, not at construction: workerd refuses randomness at global scope,
// where a store may be made. Static JS, copied into pkg/ by the build.
export class Versions {
  #id = '';
  #writes = 0;

  /** A version no writer has used: 32 hex digits. */
  next() {
    if (this.#id === '') {
      const words = crypto.getRandomValues(new Uint32Array(2));
      this.#id = words[0].toString(16).padStart(8, '0') + words[1].toString(16).padStart(8, '0');
    }
    this.#writes += 1;
    return this.#id + this.#writes.toString(16).padStart(16, '0');
  }
}
