// The example worker as `make dev` runs it (wrangler dev, local, offline): N claims on one fresh
// board sent at once, the statuses they got and how long the last answer took; the same for
// notifications about one object, each run beside as many requests to an unknown route (404, no
// I/O: what wrangler dev itself takes for the burst in those seconds). Three runs each. Then
// three bursts of reconcile notifications about one object (coalescing calls), the object's
// source flipped before each, each beside its unknown-route floor: answers, runs, times.
//
//   node bench/claims.mjs [--claims 200] [--notifications 300] [--reconciles 300] [--root DIR]
//
// `--root` runs another checkout's worker (to compare trees on one machine). Not a test.
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from '../tests/runtimes/ports.mjs';
import { option } from './runtimes/options.mjs';

const root = option('root', join(dirname(fileURLToPath(import.meta.url)), '..'));
const claims = Number(option('claims', 200));
const notifications = Number(option('notifications', 300));
const reconciles = Number(option('reconciles', 300));

const port = await freePort();
// State outside the tree: wrangler dev restarts the worker when files under it change.
const persist = mkdtempSync(join(tmpdir(), 'keyturn-claims-'));
const wrangler = spawn(join(root, 'node_modules/.bin/wrangler'), ['dev', '--local', '--ip', '127.0.0.1', '--port', String(port), '--persist-to', persist], {
  cwd: root,
  env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', NO_COLOR: '1' },
  stdio: ['ignore', process.env.KEYTURN_WRANGLER_LOG ? openSync(process.env.KEYTURN_WRANGLER_LOG, 'w') : 'ignore', process.env.KEYTURN_WRANGLER_LOG ? openSync(process.env.KEYTURN_WRANGLER_LOG + '.err', 'w') : 'ignore'],
  detached: true,
});
const base = `http://127.0.0.1:${port}`;
try {
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/boards/warmup`)).ok) break;
    } catch {}
    if (i > 600) throw new Error('wrangler dev did not start');
    await sleep(100);
  }
  const post = (path, body) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (let run = 1; run <= 3; run++) {
    const board = `bench-${port}-${run}`;
    let started = performance.now();
    const statuses = await Promise.all(Array.from({ length: claims }, (_, i) => post(`/boards/${board}/claims`, { card: `c${i}` }).then(async (r) => ((await r.text()).startsWith('Your worker restarted') ? 'restarted' : r.status))));
    const ms = performance.now() - started;
    const count = (status) => statuses.filter((s) => s === status).length;
    const state = await (await fetch(`${base}/boards/${board}`)).json();
    console.log(`claims run ${run}: ${claims} at once → ${count(201)} × 201, ${count(409)} × 409, ${count(503)} × 503, other ${claims - count(201) - count(409) - count(503)}; last answer after ${ms.toFixed(0)} ms; board holds ${state.inProgress.length}`);

    started = performance.now();
    await Promise.all(Array.from({ length: notifications }, () => post('/nowhere', { delta: 1 }).then((r) => r.text())));
    const baselineMs = performance.now() - started;

    const object = `bench-${port}-${run}`;
    started = performance.now();
    const answers = await Promise.all(Array.from({ length: notifications }, () => post(`/objects/${object}/notifications`, { delta: 1 }).then(async (r) => {
      const text = await r.text();
      // wrangler dev now and then restarts its runtime mid-burst (the previous tree's worker too).
      return text.startsWith('Your worker restarted') ? { status: 'restarted' } : { status: r.status, body: JSON.parse(text) };
    })));
    const notifiedMs = performance.now() - started;
    const ok = answers.filter((a) => a.status === 200);
    const total = Math.max(0, ...ok.map((a) => a.body.total));
    console.log(`notifications run ${run}: ${notifications} at once → ${ok.length} × 200, ${answers.filter((a) => a.status === 503).length} × 503, ${answers.filter((a) => a.status === 'restarted').length} cut by a runtime restart; total ${total}; last answer after ${notifiedMs.toFixed(0)} ms (${notifications} requests to an unknown route: ${baselineMs.toFixed(0)} ms)`);
  }
  if (reconciles > 0) await reconcileBursts(`acl-${port}`);
} finally {
  process.kill(-wrangler.pid, 'SIGTERM');
  await sleep(500);
  rmSync(persist, { recursive: true, force: true });
}

/** Three bursts of reconcile notifications, the source flipped before each. */
async function reconcileBursts(object) {
  const ratios = [];
  let runsBefore = 0;
  for (const [burst, isPublic] of [true, false, true].entries()) {
    const set = await fetch(`${base}/objects/${object}/source`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public: isPublic }) });
    if (set.status !== 200) throw new Error(`PUT source answered ${set.status}`);
    let started = performance.now();
    await Promise.all(Array.from({ length: reconciles }, () => fetch(`${base}/nowhere`, { method: 'POST' }).then((r) => r.text())));
    const floorMs = performance.now() - started;
    started = performance.now();
    const answers = await Promise.all(Array.from({ length: reconciles }, () => fetch(`${base}/objects/${object}/reconcile`, { method: 'POST' }).then(async (r) => {
      const text = await r.text();
      return text.startsWith('Your worker restarted') ? { status: 'restarted' } : { status: r.status, body: JSON.parse(text) };
    })));
    const burstMs = performance.now() - started;
    const acl = await (await fetch(`${base}/objects/${object}/acl`)).json();
    const ok = answers.filter((a) => a.status === 200);
    const equal = ok.filter((a) => a.body.public === isPublic).length;
    const runs = acl.runs - runsBefore;
    runsBefore = acl.runs;
    ratios.push(burstMs / floorMs);
    console.log(`reconcile burst ${burst + 1} (source public: ${isPublic}): ${reconciles} at once → ${ok.length} × 200, ${equal} equal to the source, ACL public: ${acl.public}; ${runs} runs; last answer after ${burstMs.toFixed(0)} ms (${reconciles} requests to an unknown route: ${floorMs.toFixed(0)} ms; ${(burstMs / floorMs).toFixed(2)}× that floor)`);
  }
  ratios.sort((a, b) => a - b);
  console.log(`reconcile bursts: median ${ratios[1].toFixed(2)}× the unknown-route floor`);
}
