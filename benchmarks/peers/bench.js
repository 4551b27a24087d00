'use strict';
// The peer comparison's orchestrator (started by run.sh, which builds the
// C++ side and starts the server):
//
//   node bench.js --url redis://127.0.0.1:PORT --cxx PATH/peer_scenarios
//                 --hop-floor PATH/hop_floor
//                 [--profile quick|full] [--rounds N] [--runner]
//                 [--out FILE] [--command TEXT]
//
// For each round, each scenario runs once per system, the systems' order
// rotating from round to round so that machine drift hits all alike, with
// FLUSHALL before every system. Each system's side runs in its own
// processes (the C++ program for this library, driver.js for the Node.js
// systems), which print JSON lines; this process only times nothing itself
// but memory (INFO memory around the bulk enqueue). Writes one JSON file:
// the machine, the settings, every run, and per figure the median and the
// min-max over the rounds.
//
// Next to the put -> handler latency scenario, hop_floor_1k measures the
// machine floor: one PUBLISH hop between two processes at 1,000 messages/s
// through hop_floor.cpp (plain sockets, blocking read, no library), what
// any job path with a wake-up message pays at least once.
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Redis = require('ioredis');
const c = require('./lib/common');

const PROFILES = {
  // Under 3 minutes with the build cached: a smoke run, not figures.
  quick: {
    rounds: 1, bulk: 5000, single: 1000, inflight: 2000,
    backlog: { 1: 1000, 16: 2000, 64: 3000 }, e2e: 5000,
    latencySeconds: 3, feed1kSeconds: 1, feed10kSeconds: 1,
  },
  full: {
    rounds: 3, bulk: 100000, single: 10000, inflight: 30000,
    backlog: { 1: 5000, 16: 20000, 64: 40000 }, e2e: 50000,
    latencySeconds: 10, feed1kSeconds: 5, feed10kSeconds: 2,
  },
};

const JOB_RATE = 1000;       // put -> handler latency, jobs/s
const LATENCY_WORKERS = 16;  // worker concurrency in the latency scenario
const E2E_CONCURRENCY = 64;
const CHILD_TIMEOUT_S = 150; // each child gives up after this

function parseArgs(argv) {
  const o = { profile: 'quick', rounds: 0, runner: false, out: '', command: '', url: '', cxx: '', hopFloor: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--url') o.url = v();
    else if (a === '--cxx') o.cxx = v();
    else if (a === '--hop-floor') o.hopFloor = v();
    else if (a === '--profile') o.profile = v();
    else if (a === '--rounds') o.rounds = Number(v());
    else if (a === '--runner') o.runner = true;
    else if (a === '--runner-skipped') o.runnerSkipped = true;
    else if (a === '--out') o.out = v();
    else if (a === '--command') o.command = v();
    else throw new Error(`unknown option ${a}`);
  }
  if (!PROFILES[o.profile]) throw new Error('--profile must be quick or full');
  if (!o.url || !o.cxx) throw new Error('--url and --cxx are required');
  // The floor is part of every run: without its program, stop here rather
  // than write results that silently lack it.
  if (!o.hopFloor) throw new Error('--hop-floor PATH/hop_floor is required (run.sh builds it)');
  try {
    fs.accessSync(o.hopFloor, fs.constants.X_OK);
  } catch {
    throw new Error(`--hop-floor: ${o.hopFloor} is missing or not executable (run.sh builds it)`);
  }
  return o;
}

// ---------------------------------------------------------------------------
// Child processes: started by us, read line by line, killed by their own pid
// when they overrun.

function start(argv, label) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  let stderr = '';
  let readyResolve;
  const ready = new Promise((r) => { readyResolve = r; });
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      try {
        const obj = JSON.parse(line);
        if (obj.ready) readyResolve(true);
        else lines.push(obj);
      } catch {
        stderr += `(not JSON) ${line}\n`;
      }
    }
  });
  child.stderr.on('data', (d) => { stderr += d; });
  // A program that cannot start: 'close' still follows, with the reason.
  child.on('error', (e) => { stderr += `${e.message}\n`; });
  const killer = setTimeout(() => {
    stderr += `killed after ${CHILD_TIMEOUT_S + 60} s\n`;
    child.kill('SIGKILL');
  }, (CHILD_TIMEOUT_S + 60) * 1000);
  const done = new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(killer);
      readyResolve(false);
      const result = lines[lines.length - 1];
      if (code !== 0 || !result) {
        resolve({ error: `${label} exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}` });
      } else {
        resolve(result);
      }
    });
  });
  return { child, ready, done };
}

async function runOne(argv, label) {
  return start(argv, label).done;
}

// Starts a waiting role, then the driving role once the first listens;
// returns both results.
async function runPair(waitArgv, driveArgv, label) {
  const w = start(waitArgv, `${label} (waiting side)`);
  const ok = await w.ready;
  if (!ok) return { waiting: await w.done, driving: { error: 'not started: waiting side failed' } };
  const driving = await runOne(driveArgv, `${label} (driving side)`);
  const waiting = await w.done;
  return { waiting, driving };
}

// ---------------------------------------------------------------------------
// Systems: how to start a role.

function systems(o) {
  const driver = path.join(__dirname, 'driver.js');
  const common = ['--url', o.url, '--timeout', String(CHILD_TIMEOUT_S)];
  const node = (name) => (role, args) => [process.execPath, driver, name, role, ...args, ...common];
  const cxx = (extra) => (role, args) =>
    [o.cxx, role, ...args, ...(role === 'work' ? extra : []), ...common];
  const jobs = [
    { id: 'thoonk', label: 'thoonk-asio (claim/finish)', cmd: cxx([]) },
  ];
  // The runner only changes the worker: it runs the scenarios with one.
  if (o.runner) {
    jobs.push({ id: 'thoonk_runner', label: 'thoonk-asio (runner)', cmd: cxx(['--runner']), workerOnly: true });
  }
  jobs.push({ id: 'bullmq', label: 'BullMQ', cmd: node('bullmq') });
  jobs.push({ id: 'beequeue', label: 'bee-queue', cmd: node('beequeue') });
  const feeds = [
    { id: 'thoonk_feed', label: 'thoonk-asio feed', cmd: cxx([]) },
    { id: 'ioredis_pubsub', label: 'ioredis PUBLISH/SUBSCRIBE', cmd: node('pubsub') },
  ];
  // The machine floor: hop_floor's roles take the same options as the
  // subscribe and publish roles above, except --subscribers (always 1).
  const floor = [
    { id: 'hop_floor', label: 'machine floor: one PUBLISH hop, C, blocking read',
      cmd: (role, args) => [o.hopFloor, role, ...args, ...common] },
  ];
  return { jobs, feeds, floor };
}

// ---------------------------------------------------------------------------
// redis-benchmark: the server's ceiling for the cheapest command standing
// for a step (LPUSH of the payload for a put, RPOP for taking a job).

function redisBenchmark(o, args) {
  const u = new URL(o.url);
  const out = execFileSync('redis-benchmark',
    ['-h', u.hostname, '-p', u.port, '-q', ...args], { encoding: 'utf8', timeout: 120000 });
  const m = out.match(/([\d.]+) requests per second/g);
  if (!m) throw new Error(`redis-benchmark printed no rate: ${out.slice(-200)}`);
  return Number(m[m.length - 1].match(/[\d.]+/)[0]);
}

const CEILING_KEY = 'peers:ceiling';

// ---------------------------------------------------------------------------
// Scenarios. Each returns { figures: {name: number}, raw }.

// CPU seconds the server has used (user + system).
async function serverCpu(redis) {
  const info = await redis.info('cpu');
  const f = (k) => Number(info.match(new RegExp(`${k}:([\\d.]+)`))[1]);
  return f('used_cpu_user') + f('used_cpu_sys');
}

// One byte count of INFO memory: used_memory (the data), or
// used_memory_lua (the script interpreter: the scripts cached so far and
// their garbage, recorded before every run).
async function memoryField(redis, field) {
  const info = await redis.info('memory');
  return Number(info.match(new RegExp(`^${field}:(\\d+)`, 'm'))[1]);
}

function rateOf(jobs, startNs, endNs) {
  return jobs / (Number(BigInt(endNs) - BigInt(startNs)) / 1e9);
}

function checkComplete(...rs) {
  for (const r of rs) {
    if (r.error) throw new Error(r.error);
    if (r.complete === false) throw new Error(`incomplete: ${JSON.stringify(r).slice(0, 300)}`);
  }
}

function scenarios(o, p) {
  const payload = c.payload(0);
  const list = [];
  // Enqueue: bulk (with Redis memory per waiting job), single, 64 in flight.
  list.push({
    id: 'enqueue_bulk', kind: 'jobs',
    async run(sys, redis) {
      const m0 = await memoryField(redis, 'used_memory');
      const r = await runOne(sys.cmd('enqueue', ['--mode', 'bulk', '--jobs', String(p.bulk)]), 'enqueue bulk');
      checkComplete(r);
      const m1 = await memoryField(redis, 'used_memory');
      return { figures: { enqueue_bulk: r.per_s, memory_per_job: (m1 - m0) / p.bulk }, raw: r };
    },
    async ceiling(redis) {
      const m0 = await memoryField(redis, 'used_memory');
      const rps = redisBenchmark(o, ['-c', '1', '-P', '1000', '-n', String(p.bulk), 'LPUSH', CEILING_KEY, payload]);
      const m1 = await memoryField(redis, 'used_memory');
      return { figures: { enqueue_bulk: rps, memory_per_job: (m1 - m0) / p.bulk },
        raw: { command: `LPUSH, -c 1 -P 1000 -n ${p.bulk}` } };
    },
  });
  for (const [id, mode, n, rb] of [
    ['enqueue_single', 'single', p.single, ['-c', '1', '-P', '1']],
    ['enqueue_inflight64', 'inflight', p.inflight, ['-c', '1', '-P', '64']],
  ]) {
    list.push({
      id, kind: 'jobs',
      async run(sys) {
        const r = await runOne(sys.cmd('enqueue', ['--mode', mode, '--jobs', String(n)]), id);
        checkComplete(r);
        return { figures: { [id]: r.per_s }, raw: r };
      },
      async ceiling() {
        const rps = redisBenchmark(o, [...rb, '-n', String(n), 'LPUSH', CEILING_KEY, payload]);
        return { figures: { [id]: rps }, raw: { command: `LPUSH, ${rb.join(' ')} -n ${n}` } };
      },
    });
  }
  // Backlog at concurrency 1, 16, 64: pre-filled, timed from worker start to
  // the last completion acknowledged by Redis.
  for (const conc of [1, 16, 64]) {
    const n = p.backlog[conc];
    const id = `backlog_c${conc}`;
    list.push({
      id, kind: 'jobs', worker: true,
      async run(sys) {
        const fill = await runOne(sys.cmd('enqueue', ['--mode', 'bulk', '--jobs', String(n)]), `${id} fill`);
        checkComplete(fill);
        const w = await runOne(sys.cmd('work', ['--jobs', String(n), '--concurrency', String(conc)]), `${id} work`);
        checkComplete(w);
        return { figures: { [id]: rateOf(n, w.t_start_ns, w.t_last_ns) }, raw: w };
      },
      async ceiling() {
        redisBenchmark(o, ['-c', '1', '-P', '1000', '-n', String(n), 'LPUSH', CEILING_KEY, payload]);
        const rps = redisBenchmark(o, ['-c', '1', '-P', String(conc), '-n', String(n), 'RPOP', CEILING_KEY]);
        return { figures: { [id]: rps }, raw: { command: `RPOP, -c 1 -P ${conc} -n ${n} (after LPUSH of ${n})` } };
      },
    });
  }
  // End to end at 64: worker process waiting, producer process enqueueing in
  // chunks of 1,000. Timed from the producer's start to the worker's last
  // acknowledged completion; CPU of both processes per 100,000 jobs.
  list.push({
    id: 'e2e_c64', kind: 'jobs', worker: true,
    async run(sys, redis) {
      const n = p.e2e;
      const s0 = await serverCpu(redis);
      const { waiting: w, driving: pr } = await runPair(
        sys.cmd('work', ['--jobs', String(n), '--concurrency', String(E2E_CONCURRENCY)]),
        sys.cmd('produce', ['--jobs', String(n)]), 'e2e');
      checkComplete(w, pr);
      const s1 = await serverCpu(redis);
      return {
        figures: {
          e2e_c64: rateOf(n, pr.t_start_ns, w.t_last_ns),
          cpu_per_100k: ((w.cpu_s + pr.cpu_s) / n) * 100000,
          server_cpu_per_100k: ((s1 - s0) / n) * 100000,
        },
        raw: { worker: w, producer: pr },
      };
    },
    async ceiling() {
      // A put and a take per job: LPUSH (pipelined 1,000) then RPOP
      // (pipelined 64), combined as the time for both.
      const n = p.e2e;
      const push = redisBenchmark(o, ['-c', '1', '-P', '1000', '-n', String(n), 'LPUSH', CEILING_KEY, payload]);
      const pop = redisBenchmark(o, ['-c', '1', '-P', '64', '-n', String(n), 'RPOP', CEILING_KEY]);
      return { figures: { e2e_c64: 1 / (1 / push + 1 / pop) },
        raw: { command: `1/(1/LPUSH -P 1000 + 1/RPOP -P 64), -n ${n}`, push, pop } };
    },
  });
  // Put -> handler start at 1,000 jobs/s, open loop, separate processes.
  list.push({
    id: 'latency_1k', kind: 'jobs', worker: true,
    async run(sys) {
      const n = JOB_RATE * p.latencySeconds;
      const { waiting: w, driving: pr } = await runPair(
        sys.cmd('work', ['--jobs', String(n), '--concurrency', String(LATENCY_WORKERS), '--latency']),
        sys.cmd('produce', ['--jobs', String(n), '--rate', String(JOB_RATE)]), 'latency');
      checkComplete(w, pr);
      const l = w.latency;
      return {
        figures: {
          latency_p50_ms: l.p50_ms, latency_p90_ms: l.p90_ms, latency_p99_ms: l.p99_ms,
          latency_max_ms: l.max_ms, latency_rate: pr.rate_achieved,
          // This library's producer also times each put's reply.
          ...(pr.put_ack ? { put_ack_p50_ms: pr.put_ack.p50_ms, put_ack_p99_ms: pr.put_ack.p99_ms } : {}),
        },
        raw: { worker: w, producer: pr },
      };
    },
  });
  // The machine floor next to it: one PUBLISH hop at the same rate for as
  // long, publisher and subscriber in their own processes (hop_floor.cpp).
  list.push({
    id: 'hop_floor_1k', kind: 'floor',
    async run(sys) {
      const m = JOB_RATE * p.latencySeconds;
      const { waiting: s, driving: pb } = await runPair(
        sys.cmd('subscribe', ['--messages', String(m)]),
        sys.cmd('publish', ['--messages', String(m), '--rate', String(JOB_RATE)]), 'hop_floor_1k');
      checkComplete(s, pb);
      const l = s.latency;
      return {
        figures: {
          hop_floor_1k_p50_ms: l.p50_ms, hop_floor_1k_p90_ms: l.p90_ms,
          hop_floor_1k_p99_ms: l.p99_ms, hop_floor_1k_max_ms: l.max_ms,
          hop_floor_1k_rate: pb.rate_achieved,
        },
        raw: { subscriber: s, publisher: pb },
      };
    },
  });
  // Feed publish -> subscriber callback.
  for (const [rate, secs] of [[1000, p.feed1kSeconds], [10000, p.feed10kSeconds]]) {
    for (const subs of [1, 16]) {
      const id = `feed_${rate / 1000}k_s${subs}`;
      list.push({
        id, kind: 'feeds',
        async run(sys) {
          const m = rate * secs;
          const { waiting: s, driving: pb } = await runPair(
            sys.cmd('subscribe', ['--subscribers', String(subs), '--messages', String(m)]),
            sys.cmd('publish', ['--messages', String(m), '--rate', String(rate)]), id);
          checkComplete(s, pb);
          const l = s.latency;
          return {
            figures: {
              [`${id}_p50_ms`]: l.p50_ms, [`${id}_p90_ms`]: l.p90_ms,
              [`${id}_p99_ms`]: l.p99_ms, [`${id}_max_ms`]: l.max_ms,
              [`${id}_rate`]: pb.rate_achieved,
            },
            raw: { subscriber: s, publisher: pb },
          };
        },
      });
    }
  }
  return list;
}

// ---------------------------------------------------------------------------

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

function machine() {
  const cpus = os.cpus();
  let redisVersion = '';
  try {
    redisVersion = execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim();
  } catch { redisVersion = 'unknown'; }
  const pkg = (n) => require(`${n}/package.json`).version;
  return {
    nproc: cpus.length,
    cpu_model: cpus.length ? cpus[0].model : 'unknown',
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`,
    redis_server: redisVersion,
    node: process.version,
    packages: { bullmq: pkg('bullmq'), 'bee-queue': pkg('bee-queue'), ioredis: pkg('ioredis') },
  };
}

function loadavg() {
  return os.loadavg().map((x) => Math.round(x * 100) / 100);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const p = PROFILES[o.profile];
  const rounds = o.rounds || p.rounds;
  const sys = systems(o);
  const list = scenarios(o, p);
  const redis = new Redis(o.url);
  const runs = [];
  const t0 = Date.now();
  const meta = {
    started: new Date().toISOString(), profile: o.profile, rounds, command: o.command,
    machine: machine(), load_before: loadavg(), sizes: p,
    job_rate: JOB_RATE, latency_workers: LATENCY_WORKERS, e2e_concurrency: E2E_CONCURRENCY,
    runner: o.runner, runner_skipped: Boolean(o.runnerSkipped),
  };
  process.stderr.write(`profile ${o.profile}, ${rounds} round(s), load ${meta.load_before.join(' ')}\n`);
  const loads = [];
  for (let round = 0; round < rounds; round++) {
    loads.push(loadavg()[0]);
    for (const sc of list) {
      if (!sys[sc.kind]) throw new Error(`scenario ${sc.id}: no systems of kind ${sc.kind}`);
      const members = sys[sc.kind].filter((m) => sc.worker || !m.workerOnly);
      if (sc.ceiling) members.push({ id: 'redis_benchmark', label: 'redis-benchmark ceiling', ceiling: true });
      // Rotate the order round by round.
      const order = members.map((_, i) => members[(i + round) % members.length]);
      for (const m of order) {
        await redis.flushall();
        const lua = await memoryField(redis, 'used_memory_lua');
        const t = Date.now();
        let rec;
        try {
          const r = m.ceiling ? await sc.ceiling(redis) : await sc.run(m, redis);
          rec = { round, scenario: sc.id, system: m.id, figures: r.figures, raw: r.raw };
        } catch (e) {
          rec = { round, scenario: sc.id, system: m.id, error: String(e.message || e) };
        }
        rec.seconds = (Date.now() - t) / 1000;
        rec.lua_memory_before = lua;
        runs.push(rec);
        const shown = rec.error ? `ERROR ${rec.error}` :
          Object.entries(rec.figures).map(([k, v]) => `${k}=${Number(v).toPrecision(4)}`).join(' ');
        process.stderr.write(`[round ${round + 1}/${rounds}] ${sc.id} ${m.id}: ${shown} (${rec.seconds.toFixed(1)} s)\n`);
      }
    }
  }
  await redis.flushall();
  redis.disconnect();
  // Summaries: figure -> system -> {median, min, max, values}.
  const summary = {};
  for (const r of runs) {
    if (r.error) continue;
    for (const [k, v] of Object.entries(r.figures)) {
      summary[k] ??= {};
      summary[k][r.system] ??= { values: [] };
      summary[k][r.system].values.push(v);
    }
  }
  for (const bySys of Object.values(summary)) {
    for (const s of Object.values(bySys)) {
      s.median = median(s.values);
      s.min = Math.min(...s.values);
      s.max = Math.max(...s.values);
    }
  }
  meta.finished = new Date().toISOString();
  meta.seconds = (Date.now() - t0) / 1000;
  meta.load_after = loadavg();
  meta.load_1min_per_round = loads;
  meta.labels = Object.fromEntries([...sys.jobs, ...sys.feeds, ...sys.floor,
    { id: 'redis_benchmark', label: 'redis-benchmark ceiling' }].map((s) => [s.id, s.label]));
  const doc = { meta, summary, runs };
  const out = o.out || path.join(__dirname, 'results', `peers-${o.profile}-${meta.started.replace(/[:.]/g, '-')}.json`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(doc, null, 1) + '\n');
  const errors = runs.filter((r) => r.error).length;
  process.stderr.write(`wrote ${out} (${runs.length} runs, ${errors} failed, ${meta.seconds.toFixed(0)} s)\n`);
  process.stdout.write(out + '\n');
}

main().catch((e) => {
  process.stderr.write(`bench: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
