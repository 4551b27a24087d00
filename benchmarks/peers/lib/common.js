'use strict';
// What every Node.js driver shares: the command line (the same as
// benchmarks/peer_scenarios.cpp), the payload, the clock, CPU time,
// percentiles and the JSON lines the harness reads.

// The same ~75-byte JSON payload on every side; the last 19 digits are a
// CLOCK_MONOTONIC stamp in nanoseconds (zero where no latency is measured).
const PAYLOAD_HEAD = '{"op":"resize","user":"u-12345","w":1024,"h":768,"t":"';
const PAYLOAD_TAIL = '"}';

function payload(stamp) {
  return PAYLOAD_HEAD + String(stamp).padStart(19, '0') + PAYLOAD_TAIL;
}

// process.hrtime.bigint() reads CLOCK_MONOTONIC (libuv's uv_hrtime), the
// clock of std::chrono::steady_clock on Linux: comparable across processes.
function nowNs() {
  return process.hrtime.bigint();
}

function stampOf(text) {
  return BigInt(text.slice(-21, -2));
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function parseArgs(argv) {
  const o = {
    queue: 'peers', mode: 'bulk', jobs: 0, messages: 0, concurrency: 1,
    subscribers: 1, rate: 0, latency: false, timeout: 120, url: '',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--url': o.url = value(); break;
      case '--queue': o.queue = value(); break;
      case '--mode': o.mode = value(); break;
      case '--jobs': o.jobs = Number(value()); break;
      case '--messages': o.messages = Number(value()); break;
      case '--concurrency': o.concurrency = Number(value()); break;
      case '--subscribers': o.subscribers = Number(value()); break;
      case '--rate': o.rate = Number(value()); break;
      case '--timeout': o.timeout = Number(value()); break;
      case '--latency': o.latency = true; break;
      default: throw new Error(`unknown option ${a}`);
    }
  }
  if (!o.url) throw new Error('--url is required');
  const u = new URL(o.url);
  o.host = u.hostname;
  o.port = Number(u.port || 6379);
  return o;
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// p in [0,1] of a sorted array, rounded to the nearest index, as the C++
// side (benchmarks/support/bench_support.cpp) computes it.
function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const idx = Math.min(sorted.length - 1, Math.floor(p * (sorted.length - 1) + 0.5));
  return sorted[idx];
}

// Latency summary in ms of nanosecond samples, first 10% dropped.
function latencySummary(ns) {
  const skip = Math.floor(ns.length / 10);
  const ms = ns.slice(skip).map((v) => Number(v) / 1e6).sort((a, b) => a - b);
  return {
    samples: ms.length,
    discarded: skip,
    p50_ms: percentile(ms, 0.5),
    p90_ms: percentile(ms, 0.9),
    p99_ms: percentile(ms, 0.99),
    max_ms: ms.length ? ms[ms.length - 1] : 0,
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Calls send(i) for i in [0, n) at `rate` per second, open loop: each call
// is made when its time has come, whether or not earlier ones completed.
// Node timers have 1 ms granularity, so at high rates several due sends go
// out in one tick (each stamped when it is sent).
async function openLoop(n, rate, send) {
  const start = nowNs();
  const period = 1e9 / rate;
  let i = 0;
  while (i < n) {
    const elapsed = Number(nowNs() - start);
    while (i < n && i * period <= elapsed) send(i++);
    if (i >= n) break;
    const wait = (i * period - Number(nowNs() - start)) / 1e6;
    if (wait >= 1) await sleep(Math.floor(wait));
    else await new Promise((r) => setImmediate(r));
  }
  return Number(nowNs() - start) / 1e9;
}

// Polls cond() every ms until it holds or `ms` passed.
async function waitFor(cond, ms) {
  const until = Date.now() + ms;
  while (!cond() && Date.now() < until) await sleep(1);
  return cond();
}

// ---- the job scenarios, shared by the queue systems ----
//
// A system describes its queue with three functions:
//   addOne(data)        adds one job, resolves when the server has it
//   addChunk(data, k)   adds k jobs in one bulk call, resolves to how many
//                       of them failed
// and the scenarios below time them the same way for every system.

const CHUNK = 1000;

// Adds `total` jobs through addChunk in chunks of at most CHUNK; returns
// how many failed.
async function addInChunks(total, data, addChunk) {
  let failed = 0;
  for (let done = 0; done < total;) {
    const k = Math.min(CHUNK, total - done);
    failed += await addChunk(data, k);
    done += k;
  }
  return failed;
}

// The enqueue scenario: o.jobs jobs, --mode bulk (chunks of 1,000), single
// (one at a time) or inflight (64 adds outstanding); throughput and CPU.
async function enqueueJobs(o, { addOne, addChunk }) {
  const data = JSON.parse(payload(0));
  const cpu0 = cpuSeconds();
  const t0 = nowNs();
  if (o.mode === 'bulk') {
    const failed = await addInChunks(o.jobs, data, addChunk);
    if (failed) throw new Error(`bulk add: ${failed} jobs failed`);
  } else if (o.mode === 'single') {
    for (let i = 0; i < o.jobs; i++) await addOne(data);
  } else if (o.mode === 'inflight') {
    let left = o.jobs;
    const producer = async () => {
      while (left > 0) {
        left--;
        await addOne(data);
      }
    };
    await Promise.all(Array.from({ length: 64 }, producer));
  } else {
    throw new Error('--mode must be bulk, single or inflight');
  }
  const secs = Number(nowNs() - t0) / 1e9;
  return { jobs: o.jobs, seconds: secs, per_s: o.jobs / secs, cpu_s: cpuSeconds() - cpu0,
    complete: true };
}

// The producer of the end-to-end and latency scenarios: o.jobs jobs in
// bulk chunks, or with --rate one at a time, open loop, each stamped when
// it is sent.
async function produceJobs(o, { addOne, addChunk }) {
  const cpu0 = cpuSeconds();
  const tStart = nowNs();
  let acked = 0, errors = 0;
  if (!(o.rate > 0)) {
    errors = await addInChunks(o.jobs, JSON.parse(payload(0)), addChunk);
    acked = o.jobs - errors;
  } else {
    await openLoop(o.jobs, o.rate, () => {
      addOne(JSON.parse(payload(nowNs()))).then(() => acked++, () => errors++);
    });
    await waitFor(() => acked + errors >= o.jobs, 10000);
  }
  const tEnd = nowNs();
  return {
    jobs: o.jobs, acked, errors, t_start_ns: tStart.toString(), t_end_ns: tEnd.toString(),
    rate_achieved: o.jobs / (Number(tEnd - tStart) / 1e9), cpu_s: cpuSeconds() - cpu0,
    complete: acked === o.jobs,
  };
}

// The worker's bookkeeping. The system runs `handler` as its job handler
// (it records the latency from the payload's stamp when o.latency) and
// calls `finished()` or `failed()` once the server has a job's outcome;
// `run(start, stop)` says ready, calls start(), waits until o.jobs have
// finished or o.timeout s passed, calls stop() and returns the result.
function workerTally(o) {
  const lat = [];
  let count = 0, errors = 0, tLast = 0n, resolveDone;
  const done = new Promise((r) => { resolveDone = r; });
  return {
    handler: async (job) => {
      if (o.latency) lat.push(nowNs() - BigInt(job.data.t));
    },
    finished: () => {
      if (++count === o.jobs) {
        tLast = nowNs();
        resolveDone();
      }
    },
    failed: () => { errors++; },
    run: async (start, stop) => {
      emit({ ready: true });
      const cpu0 = cpuSeconds();
      const tStart = nowNs();
      start();
      const timer = setTimeout(resolveDone, o.timeout * 1000);
      await done;
      clearTimeout(timer);
      const cpu = cpuSeconds() - cpu0;
      await stop();
      const r = {
        jobs: count, errors, concurrency: o.concurrency, mode: 'worker',
        t_start_ns: tStart.toString(), t_last_ns: tLast.toString(), cpu_s: cpu,
        complete: count >= o.jobs,
      };
      if (o.latency) r.latency = latencySummary(lat);
      return r;
    },
  };
}

module.exports = {
  payload, nowNs, stampOf, cpuSeconds, parseArgs, emit, percentile, latencySummary,
  sleep, openLoop, waitFor, enqueueJobs, produceJobs, workerTally,
};
