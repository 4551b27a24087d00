'use strict';
// BullMQ's side of the scenarios. Settings (docs/benchmarks.md lists them):
// jobs added with removeOnComplete: true and removeOnFail: true (completed
// jobs leave Redis, as in every system here); the Worker runs with the
// scenario's concurrency and otherwise BullMQ's defaults (lock renewal,
// stalled-job check, the events stream BullMQ always writes).
const { Queue, Worker } = require('bullmq');
const c = require('../lib/common');

const JOB_OPTS = { removeOnComplete: true, removeOnFail: true };

function connection(o) {
  // maxRetriesPerRequest: null is what BullMQ requires for workers.
  return { host: o.host, port: o.port, maxRetriesPerRequest: null };
}

function queue(o) {
  return new Queue(o.queue, { connection: connection(o), defaultJobOptions: JOB_OPTS });
}

async function enqueue(o) {
  const q = queue(o);
  await q.waitUntilReady();
  const data = JSON.parse(c.payload(0));
  const cpu0 = c.cpuSeconds();
  const t0 = c.nowNs();
  if (o.mode === 'bulk') {
    for (let done = 0; done < o.jobs;) {
      const k = Math.min(1000, o.jobs - done);
      const batch = new Array(k);
      for (let i = 0; i < k; i++) batch[i] = { name: 'job', data, opts: JOB_OPTS };
      await q.addBulk(batch);
      done += k;
    }
  } else if (o.mode === 'single') {
    for (let i = 0; i < o.jobs; i++) await q.add('job', data);
  } else if (o.mode === 'inflight') {
    let left = o.jobs;
    const producer = async () => {
      while (left > 0) {
        left--;
        await q.add('job', data);
      }
    };
    await Promise.all(Array.from({ length: 64 }, producer));
  } else {
    throw new Error('--mode must be bulk, single or inflight');
  }
  const secs = Number(c.nowNs() - t0) / 1e9;
  const cpu = c.cpuSeconds() - cpu0;
  await q.close();
  return { jobs: o.jobs, seconds: secs, per_s: o.jobs / secs, cpu_s: cpu, complete: true };
}

async function produce(o) {
  const q = queue(o);
  await q.waitUntilReady();
  const cpu0 = c.cpuSeconds();
  const tStart = c.nowNs();
  let acked = 0, errors = 0;
  if (!(o.rate > 0)) {
    const data = JSON.parse(c.payload(0));
    for (let done = 0; done < o.jobs;) {
      const k = Math.min(1000, o.jobs - done);
      const batch = new Array(k);
      for (let i = 0; i < k; i++) batch[i] = { name: 'job', data, opts: JOB_OPTS };
      await q.addBulk(batch);
      done += k;
    }
    acked = o.jobs;
  } else {
    await c.openLoop(o.jobs, o.rate, () => {
      q.add('job', JSON.parse(c.payload(c.nowNs()))).then(() => acked++, () => errors++);
    });
    await c.waitFor(() => acked + errors >= o.jobs, 10000);
  }
  const tEnd = c.nowNs();
  const cpu = c.cpuSeconds() - cpu0;
  await q.close();
  return {
    jobs: o.jobs, acked, errors, t_start_ns: tStart.toString(), t_end_ns: tEnd.toString(),
    rate_achieved: o.jobs / (Number(tEnd - tStart) / 1e9), cpu_s: cpu, complete: acked === o.jobs,
  };
}

async function work(o) {
  const lat = [];
  let finished = 0, errors = 0, tLast = 0n, cpu0 = 0;
  let resolveDone;
  const done = new Promise((r) => { resolveDone = r; });
  const w = new Worker(
    o.queue,
    async (job) => {
      if (o.latency) lat.push(c.nowNs() - BigInt(job.data.t));
    },
    { connection: connection(o), concurrency: o.concurrency, autorun: false,
      removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } });
  // 'completed' is emitted after moveToCompleted returned: Redis has it.
  w.on('completed', () => {
    if (++finished === o.jobs) {
      tLast = c.nowNs();
      resolveDone();
    }
  });
  w.on('failed', () => errors++);
  w.on('error', () => errors++);
  await w.waitUntilReady();
  c.emit({ ready: true });
  cpu0 = c.cpuSeconds();
  const tStart = c.nowNs();
  w.run().catch(() => errors++);
  const timer = setTimeout(resolveDone, o.timeout * 1000);
  await done;
  clearTimeout(timer);
  const cpu = c.cpuSeconds() - cpu0;
  await w.close(true);
  const r = {
    jobs: finished, errors, concurrency: o.concurrency, mode: 'worker',
    t_start_ns: tStart.toString(), t_last_ns: tLast.toString(), cpu_s: cpu,
    complete: finished >= o.jobs,
  };
  if (o.latency) r.latency = c.latencySummary(lat);
  return r;
}

module.exports = { enqueue, produce, work };
