#!/usr/bin/env node
// The ONNX Runtime peer under bertbench's scenario harness (issue 26 §3): runs a
// bertbench-scenario-schedule/1 file (written by `bertbench bench --scenario=... --schedule_out=S.json`)
// against the dynamic-axes SQuAD model of `ort_export.py --task=squad` with the SUT policy bertbench uses,
// and writes the raw bertbench-scenario-log/1 that `bertbench bench --summarize_log=L.json` summarizes.
//   node bench/peer/ort_scenario.js --ort_dir=DIR --onnx=M.onnx --verified=M.verified.json --schedule=S.json \
//        --threads=2 --log=L.json [--warmup=1]
// Policy: issue k arrives at its schedule time t_k (seconds after the start), or, where t_k is null, when
// issue k-1 is done (SingleStream: each query issued when the previous one completes; issue 0 at 0).
// Whenever the SUT is free it takes the arrived, not yet served issues in issue order (FIFO), at most the
// schedule's batch_size of them, and runs them as one batch padded to its longest query (attention_mask 0
// on the padding); if none has arrived it waits until the next arrival. Per issue the log records its
// arrival (the schedule's time, or the previous issue's done), start (when the SUT took its batch, before
// the batch's tensors are built) and done (when session.run returned), in seconds after the start on
// process.hrtime.bigint's monotonic clock, and the batch's ordinal. Before the start: --warmup untimed runs
// of the first batch_size queries (session warm-up, as the timing runs' warm-up steps; not logged).
'use strict';
const fs = require('fs');
const ob = require('./ort_bench.js');

const FORMAT = 'bertbench-scenario-schedule/1';
const LOG_FORMAT = 'bertbench-scenario-log/1';
const COPIED = ['qsl_rng_seed', 'sample_index_rng_seed', 'schedule_rng_seed', 'min_duration_s', 'min_query_count',
  'loadgen_target_qps', 'performance_sample_count'];
const SCENARIOS = ['singlestream', 'offline', 'server'];

function parseArgs(argv) {
  const a = { ort_dir: '', onnx: '', verified: '', schedule: '', threads: 0, log: '', warmup: 1 };
  for (const arg of argv) {
    const m = /^--([a-z_]+)=(.*)$/.exec(arg);
    if (!m || !(m[1] in a)) ob.die(`unknown argument ${JSON.stringify(arg)} (expected --${Object.keys(a).join('=, --')}=)`);
    a[m[1]] = typeof a[m[1]] === 'number' ? Number(m[2]) : m[2];
  }
  for (const k of ['ort_dir', 'onnx', 'verified', 'schedule', 'log']) if (!a[k]) ob.die(`--${k}= is required`);
  if (!Number.isInteger(a.threads) || a.threads < 1) ob.die(`--threads=${a.threads}: expected an integer >= 1`);
  if (!Number.isInteger(a.warmup) || a.warmup < 0) ob.die(`--warmup=${a.warmup}: expected an integer >= 0`);
  return a;
}

// The schedule, checked whole before anything runs; one line naming the file and the fault otherwise.
function readSchedule(file) {
  const [, queries] = ob.readQueries(file);
  const s = JSON.parse(fs.readFileSync(file, 'utf8'));
  const bad = (what) => ob.die(`--schedule=${file}: ${what}`);
  if (s.format !== FORMAT) bad(`format ${JSON.stringify(s.format)}, expected ${JSON.stringify(FORMAT)}`);
  if (!SCENARIOS.includes(s.scenario)) bad(`scenario ${JSON.stringify(s.scenario)}, expected one of ${SCENARIOS.join(', ')}`);
  if (!Number.isInteger(s.batch_size) || s.batch_size < 1) bad(`batch_size ${s.batch_size}, expected an integer >= 1`);
  if (!Array.isArray(s.issues) || !s.issues.length) bad('expected a non-empty "issues" array');
  s.issues.forEach((is, k) => {
    if (!Number.isInteger(is.q) || is.q < 0 || is.q >= queries.length) bad(`issue ${k}: q ${is.q}, expected a query index < ${queries.length}`);
    if (is.t !== null && !(typeof is.t === 'number' && Number.isFinite(is.t) && is.t >= 0)) {
      bad(`issue ${k}: t ${JSON.stringify(is.t)}, expected seconds >= 0 or null (when the previous issue completes)`);
    }
  });
  return [s, queries];
}

const now = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

// Until `when` seconds after t0: a timer for all but the last millisecond (node's timers are ms-coarse),
// then polling the clock.
async function waitUntil(t0, when) {
  const ms = (when - now(t0)) * 1e3 - 1;
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  while (now(t0) < when) { /* the last < 1 ms */ }
}

async function run(ort, a, s, queries, session) {
  const issues = s.issues;
  const entries = issues.map((is) => ({ q: is.q, tokens: queries[is.q].input_ids.length, arrival: is.t, start: null,
    done: null, batch: null }));
  const t0 = process.hrtime.bigint();
  let next = 0; // the first issue not yet served
  for (let batch = 0; next < issues.length; batch++) {
    // singlestream ends as LoadGen's does ("Ending naturally", issue_query_controller.cc): after an
    // issue, once min_query_count are issued and that issue's own time has reached min_duration_s
    if (issues[next].t === null && next > 0 && next >= s.min_query_count &&
        entries[next - 1].arrival >= s.min_duration_s) {
      entries.length = next;
      break;
    }
    if (entries[next].arrival === null) entries[next].arrival = next ? entries[next - 1].done : 0;
    if (entries[next].arrival > now(t0)) await waitUntil(t0, entries[next].arrival);
    const start = now(t0);
    const take = [];
    // arrived issues in order; a null-time issue arrives only when its predecessor is done, so never
    // together with it in one batch
    for (let k = next; k < issues.length && take.length < s.batch_size; k++) {
      if (k > next && issues[k].t === null) break;
      if (entries[k].arrival > start) break;
      take.push(k);
    }
    const b = ob.paddedFeeds(ort, queries, take.map((k) => issues[k].q));
    await session.run(b.feeds);
    const done = now(t0);
    for (const k of take) Object.assign(entries[k], { start, done, batch });
    next += take.length;
  }
  return entries;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const [s, queries] = readSchedule(a.schedule);
  const ort = ob.loadOrt(a.ort_dir);
  const rec = ob.readVerified(a, 'squad');
  const session = await ort.InferenceSession.create(a.onnx, ob.sessionOptions(a, {}));
  const first = s.issues.slice(0, s.batch_size).map((is) => is.q);
  for (let i = 0; i < a.warmup; i++) await session.run(ob.paddedFeeds(ort, queries, first).feeds);
  const entries = await run(ort, a, s, queries, session);
  const [sut] = ob.peerInfo(a, rec);
  // the run's settings as the schedule names them (seeds as decimal strings), for the summary
  const settings = Object.fromEntries(COPIED.filter((k) => k in s).map((k) => [k, s[k]]));
  ob.writeJson(a.log, { format: LOG_FORMAT, sut, threads: a.threads, scenario: s.scenario, target_qps: s.target_qps ?? null,
    latency_bound_ms: s.latency_bound_ms ?? null, batch_size: s.batch_size, ...settings, entries });
  const last = entries[entries.length - 1].done;
  process.stderr.write(`ort_scenario.js: ${sut} ${s.scenario}: ${entries.length} issues in ${1 + entries[entries.length - 1].batch} ` +
    `batches, ${last.toFixed(3)} s; log ${a.log}\n`);
}

main().catch((e) => ob.die(`${e && e.message ? e.message.split('\n')[0] : e}`));
