// Run by Deno for bench/stores.mjs: times DenoKvStore on Deno KV's local engine. Prints JSON.
import { acquireLock, DenoKvStore } from '../../pkg/deno.js';
import { benchStore } from './store-bench.mjs';

const kv = await Deno.openKv(Deno.args[0]);
console.log(JSON.stringify(await benchStore(() => new DenoKvStore(kv), acquireLock)));
kv.close();
