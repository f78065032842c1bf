// Run by Deno (tests/js/deno.test.mjs): the store contract for DenoKvStore on Deno KV's own
// engine (its local SQLite backend). Four store objects over one handle stand for four
// isolates; several handles on one file answer "database is locked" under contention, which
// the lock reports as the store failure it is. Prints JSON.
import { acquireLock, DenoKvStore } from '../../pkg/deno.js';
import { contract } from './contract.mjs';

const path = Deno.args[0];
const kv = await Deno.openKv(path);
const failures = await contract(() => new DenoKvStore(kv), acquireLock);
kv.close();
console.log(JSON.stringify({ failures }));
