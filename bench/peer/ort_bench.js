#!/usr/bin/env node
// The ONNX Runtime peer's runner (node, onnxruntime-node 1.30.0 from bench/peer/setup_ort.sh).
// Driven by bench/peer/ort_export.py, which exports and verifies the model first; run by hand:
//   node bench/peer/ort_bench.js --ort_dir=DIR --onnx=M.onnx --verified=M.verified.json --threads=2 \
//        --warmup=2 --steps=10 --min_time=0 --json=out.json
//   node bench/peer/ort_bench.js --ort_dir=DIR --onnx=M.onnx --check_dir=D --optimized=OPT.onnx
//   node bench/peer/ort_bench.js --ort_dir=DIR --onnx=SQUAD.onnx --verified=SQUAD.verified.json \
//        --queries=Q.json --batch_size=B [--seq_len=T] ...   (ort_export.py --task=squad's dynamic-axes model on
//        bench/peer/squad_queries.py's real-length queries: batches of B consecutive queries as bench/runner.cpp
//        read_squad_batches forms them, each padded to its longest; docs/benchmark.md, "--squad_data")
// Timing: the same rule as `bertbench bench` and torch_bench.py: --warmup steps excluded, then at
// least --steps timed steps, more until they add up to --min_time seconds; figure = median step;
// latency p50/p90/p99 = nearest-rank percentiles of the timed steps. One step = one session.run on
// one batch (inputs built once, before timing). Writes torch_bench.py's JSON point schema; the
// point's dtype (and the peer's name: ort or ort-int8) is the verified record's.
// --check_dir: runs the model once on the int64 inputs D/<name>.bin (shapes in D/shapes.json),
// writes D/<output>.out.bin (float32) and saves ORT's optimized graph to --optimized.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const VOCAB = 30522;
const PRESETS = { tiny: [2, 128, 2, 512], mini: [4, 256, 4, 1024], small: [4, 512, 8, 2048],
  medium: [8, 512, 8, 2048], base: [12, 768, 12, 3072], large: [24, 1024, 16, 4096] };

function die(msg) { // prefixed with the script that runs (ort_scenario.js uses this module too)
  process.stderr.write(`${path.basename(process.argv[1] || 'ort_bench.js')}: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { threads: os.availableParallelism ? os.availableParallelism() : os.cpus().length, warmup: 2, steps: 10,
    min_time: 0, json: '', onnx: '', verified: '', check_dir: '', optimized: '', ort_dir: '', queries: '', batch_size: 0,
    seq_len: 0 };
  for (const arg of argv) {
    const m = /^--([a-z_]+)=(.*)$/.exec(arg);
    if (!m || !(m[1] in a)) die(`unknown argument ${JSON.stringify(arg)} (expected --${Object.keys(a).join('=, --')}=)`);
    a[m[1]] = typeof a[m[1]] === 'number' ? Number(m[2]) : m[2];
    if (typeof a[m[1]] === 'number' && !Number.isFinite(a[m[1]])) die(`--${m[1]}=${m[2]}: expected a number`);
  }
  if (!a.onnx) die('--onnx=PATH is required');
  if (!a.ort_dir) die('--ort_dir=DIR (from bench/peer/setup_ort.sh) is required');
  if (a.queries && !(Number.isInteger(a.batch_size) && a.batch_size >= 1)) die(`--batch_size=${a.batch_size}: expected an integer >= 1 with --queries`);
  return a;
}

function loadOrt(dir) {
  try {
    return require(path.join(dir, 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    die(`cannot load onnxruntime-node from ${dir}/node_modules (${e.message.split('\n')[0]}); hint: bash bench/peer/setup_ort.sh`);
  }
}

function sessionOptions(a, extra) {
  if (!(a.threads >= 1)) die(`--threads=${a.threads}: expected >= 1`);
  return Object.assign({ intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all' }, extra);
}

function percentile(sorted, q) { // nearest rank, as bench/runner.cpp
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(rank, 1) - 1)];
}

function forwardFlops(L, H, I, B, T, P) { // as torch_bench.forward_flops / model::forward_flops
  const n = B * T;
  const perLayer = 2.0 * n * (4 * H * H + 2 * H * I) + B * 4.0 * T * T * H;
  return L * perLayer + 2.0 * B * H * H + 4.0 * B * H + 2.0 * B * P * H * H + 2.0 * B * P * H * VOCAB;
}

async function check(ort, a) {
  if (!a.optimized) die('--check_dir needs --optimized=PATH');
  const shapes = JSON.parse(fs.readFileSync(path.join(a.check_dir, 'shapes.json'), 'utf8'));
  // logSeverityLevel 3: errors only (saving a graph optimised at level 'all' draws a portability warning)
  const session = await ort.InferenceSession.create(a.onnx,
    sessionOptions(a, { optimizedModelFilePath: a.optimized, logSeverityLevel: 3 }));
  // the inputs the graph declares (ort_export.py's one-layer int8 check graph and the SQuAD graph have no
  // masked_lm_positions)
  const feeds = {};
  for (const n of session.inputNames) {
    const buf = fs.readFileSync(path.join(a.check_dir, n + '.bin'));
    const data = new BigInt64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    feeds[n] = new ort.Tensor('int64', data, shapes[n]);
  }
  const out = await session.run(feeds);
  for (const n of session.outputNames) {
    const t = out[n];
    if (t.type !== 'float32') die(`${a.onnx}: output ${n} is ${t.type}, expected float32`);
    fs.writeFileSync(path.join(a.check_dir, n + '.out.bin'), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  if (!fs.existsSync(a.optimized)) die(`${a.onnx}: ORT did not save its optimized graph to ${a.optimized}`);
}

function readVerified(a, task) { // ort_export.py's record of a.onnx; dies unless it passed for this task
  if (!a.verified) die('--verified=PATH (the record ort_export.py writes) is required for timing');
  let rec;
  try {
    rec = JSON.parse(fs.readFileSync(a.verified, 'utf8'));
  } catch (e) {
    die(`--verified=${a.verified}: cannot read it (${e.message})`);
  }
  if (rec.passed !== true || path.resolve(rec.onnx) !== path.resolve(a.onnx)) {
    die(`--verified=${a.verified}: not a passing verification of ${a.onnx} (passed: ${rec.passed}, onnx: ${rec.onnx}); ` +
        'run bench/peer/ort_export.py');
  }
  if ((rec.task || 'pretraining') !== task) {
    die(`--verified=${a.verified}: a ${rec.task || 'pretraining'} model, expected ${task} ` +
        `(${task === 'squad' ? 'ort_export.py --task=squad' : 'ort_export.py without --task'})`);
  }
  if (!PRESETS[rec.model]) die(`--verified=${a.verified}: unknown model ${rec.model}`);
  return rec;
}

function readQueries(file) { // bench/peer/squad_queries.py's file, or a scenario schedule: [T, queries]
  let d;
  try {
    d = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    die(`${file}: cannot read it as JSON (${e.message.split('\n')[0]})`);
  }
  if (!Array.isArray(d.queries) || !d.queries.length) die(`${file}: expected a "queries" array with at least one query`);
  d.queries.forEach((q, i) => {
    if (q.id !== i || !Array.isArray(q.input_ids) || !q.input_ids.length || !Array.isArray(q.segment_ids) ||
        q.segment_ids.length !== q.input_ids.length) {
      die(`${file}: query ${i}: expected id ${i} and equal, non-zero input_ids/segment_ids lengths`);
    }
  });
  return [d.max_seq_length || Math.max(...d.queries.map((q) => q.input_ids.length)), d.queries];
}

// As squad_queries.stream_batches (bench/runner.cpp read_squad_batches): the first `count` batches of B consecutive
// queries, n // B full batches per pass over the file, the partial last one dropped; step i times batch i % count.
function streamBatches(n, B, count) {
  const perPass = Math.floor(n / B);
  if (!perPass) die(`--batch_size=${B}: the queries hold only ${n}, fewer than one batch`);
  return Array.from({ length: count }, (_, k) => Array.from({ length: B }, (_, r) => (k % perPass) * B + r));
}

// One batch of queries padded to its longest (attention_mask 0 on the padding): feeds, real and computed tokens.
function paddedFeeds(ort, queries, idx) {
  const B = idx.length;
  const T = Math.max(...idx.map((i) => queries[i].input_ids.length));
  const ids = new BigInt64Array(B * T), seg = new BigInt64Array(B * T), mask = new BigInt64Array(B * T);
  let real = 0;
  idx.forEach((qi, r) => {
    const q = queries[qi];
    q.input_ids.forEach((v, t) => { ids[r * T + t] = BigInt(v); seg[r * T + t] = BigInt(q.segment_ids[t]); mask[r * T + t] = 1n; });
    real += q.input_ids.length;
  });
  return { feeds: { input_ids: new ort.Tensor('int64', ids, [B, T]), token_type_ids: new ort.Tensor('int64', seg, [B, T]),
    attention_mask: new ort.Tensor('int64', mask, [B, T]) }, real, computed: B * T, T };
}

function squadForwardFlops(L, H, I, B, T) { // as torch_bench.squad_forward_flops
  return L * (2.0 * B * T * (4 * H * H + 2 * H * I) + B * 4.0 * T * T * H) + 2.0 * B * T * H * 2;
}

// The timing rule of `bertbench bench`: --warmup steps excluded, then >= --steps timed, more until --min_time s.
// step(it) runs step it (1-based) and returns what it computed ({seqs, real, computed, padded, flops}).
async function timeSteps(a, step) {
  const times = [];
  const tot = { seqs: 0, real: 0, computed: 0, padded: 0, flops: 0 };
  let sum = 0;
  for (let it = 1; it <= a.warmup || times.length < a.steps || sum < 1e3 * a.min_time; it++) {
    const t0 = process.hrtime.bigint();
    const w = await step(it);
    const dt = Number(process.hrtime.bigint() - t0) / 1e6;
    if (it > a.warmup) {
      times.push(dt);
      sum += dt;
      for (const k of Object.keys(tot)) tot[k] += w[k];
    }
  }
  return [times, tot];
}

// torch_bench.py's point schema: figures per timed step (their mean) over the median step, as bench/runner.cpp.
function makePoint(a, rec, T, B, times, tot, extra) {
  const s = [...times].sort((x, y) => x - y);
  const n = s.length;
  const med = n % 2 ? s[n >> 1] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  const perS = 1e3 / med / n;
  const dtype = rec.dtype || 'fp32'; // int8: onnxruntime.quantization.quantize_dynamic's graph (ort_export.py --dtype=int8)
  return Object.assign({ mode: 'infer', model: rec.model, dtype, seq_len: T, batch_size: B, threads: a.threads,
    steps_per_update: 1, warmup_steps: a.warmup, timed_steps: n, min_time_s: a.min_time, data: 'synthetic',
    sequences_per_second: tot.seqs * perS, tokens_per_second: tot.real * perS,
    padded_tokens_per_second: tot.padded * perS, computed_tokens_per_second: tot.computed * perS,
    real_token_fraction: tot.real / tot.padded,
    step_ms_median: med, step_ms_min: s[0], step_ms_max: s[n - 1],
    latency_ms_p50: percentile(s, 0.5), latency_ms_p90: percentile(s, 0.9), latency_ms_p99: percentile(s, 0.99),
    step_ms: times, gflops: tot.flops * perS / 1e9, ceiling_gflops: null, mfu: null, optimizer_included: false,
    peak_rss_mb: process.resourceUsage().maxRSS / 1024 }, extra);
}

function peerInfo(a, rec) { // the JSON's peer name and build_info (also ort_scenario.js's log)
  const ortPkg = JSON.parse(fs.readFileSync(path.join(a.ort_dir, 'node_modules', 'onnxruntime-node', 'package.json'), 'utf8'));
  return [(rec.dtype || 'fp32') === 'int8' ? 'ort-int8' : 'ort', { onnxruntime_node: ortPkg.version, node: process.version,
    onnx: a.onnx, session_options: sessionOptions(a, {}), verification: rec }];
}

function writeJson(file, obj) { // whole or not at all
  const tmp = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify(obj, null, 2));
  fs.renameSync(tmp, file);
}

function report(a, rec, point, tStart) {
  const short = Object.fromEntries(Object.entries(point).filter(([k]) => k !== 'step_ms')
    .map(([k, v]) => [k, typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1e3) / 1e3 : v]));
  process.stdout.write(JSON.stringify(short) + '\n');
  if (!a.json) return;
  const [peer, buildInfo] = peerInfo(a, rec);
  writeJson(a.json, { peer, points: [point],
    system_info: { cpu_model: (os.cpus()[0] || {}).model || '',
      cpu_cores: os.availableParallelism ? os.availableParallelism() : os.cpus().length },
    build_info: buildInfo, benchmark_result: { name: 'ort_bench', wall_time: (Date.now() - tStart) / 1e3 } });
}

async function bench(ort, a) {
  const rec = readVerified(a, a.queries ? 'squad' : 'pretraining');
  if (a.queries) return benchQueries(ort, a, rec);
  const { model, seq_len: T, batch_size: B, max_predictions: P } = rec;
  const [L, H, , I] = PRESETS[model];
  // A synthetic full-length batch as torch_bench.synthetic_batch (values differ; shapes and work do not).
  let seed = 7;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const ids = new BigInt64Array(B * T).map(() => BigInt(rnd(VOCAB)));
  const seg = new BigInt64Array(B * T).map((_, i) => BigInt((i % T) >= (T >> 1) ? 1 : 0));
  const mask = new BigInt64Array(B * T).fill(1n);
  const pos = new BigInt64Array(B * P).map((_, i) => BigInt(1 + Math.floor(((i % P) * (T - 2)) / P)));
  const feeds = { input_ids: new ort.Tensor('int64', ids, [B, T]), token_type_ids: new ort.Tensor('int64', seg, [B, T]),
    attention_mask: new ort.Tensor('int64', mask, [B, T]), masked_lm_positions: new ort.Tensor('int64', pos, [B, P]) };
  const session = await ort.InferenceSession.create(a.onnx, sessionOptions(a, {}));
  const tStart = Date.now();
  const work = { seqs: B, real: B * T, computed: B * T, padded: B * T, flops: forwardFlops(L, H, I, B, T, P) };
  const [times, tot] = await timeSteps(a, async () => { await session.run(feeds); return work; });
  report(a, rec, makePoint(a, rec, T, B, times, tot, {}), tStart);
}

// --queries: the dynamic-axes SQuAD model (ort_export.py --task=squad) on real-length queries, batches of
// --batch_size consecutive queries each padded to its longest (all built before timing).
async function benchQueries(ort, a, rec) {
  const [T, queries] = readQueries(a.queries);
  if (a.seq_len && a.seq_len !== T) die(`--seq_len=${a.seq_len}: expected the queries' max_seq_length, ${T} (${a.queries})`);
  const B = a.batch_size;
  const [L, H, , I] = PRESETS[rec.model];
  const batches = streamBatches(queries.length, B, Math.min(a.warmup + a.steps, 256)).map((idx) => paddedFeeds(ort, queries, idx));
  const session = await ort.InferenceSession.create(a.onnx, sessionOptions(a, {}));
  const tStart = Date.now();
  const [times, tot] = await timeSteps(a, async (it) => {
    const b = batches[(it - 1) % batches.length];
    await session.run(b.feeds);
    return { seqs: B, real: b.real, computed: b.computed, padded: B * T, flops: squadForwardFlops(L, H, I, B, b.T) };
  });
  report(a, rec, makePoint(a, rec, T, B, times, tot, { task: 'squad', data: 'queries', squad_layout: 'batch_padded',
    queries: a.queries }), tStart);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt(a.ort_dir);
  if (a.check_dir) await check(ort, a);
  else await bench(ort, a);
}

module.exports = { die, loadOrt, sessionOptions, readVerified, readQueries, paddedFeeds, peerInfo, writeJson };

if (require.main === module) main().catch((e) => die(`${e && e.message ? e.message.split('\n')[0] : e}`));
