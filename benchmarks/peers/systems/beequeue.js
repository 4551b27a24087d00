'use strict';
// bee-queue's side of the scenarios. Settings (docs/benchmarks.md lists
// them): removeOnSuccess and removeOnFailure (completed jobs leave Redis),
// storeJobs: false (no Job object kept in the process per job: nothing
// here listens to per-job events), sendEvents: false and getEvents: false
// (no PUBLISH per job: this library publishes no job events by default
// either); the worker runs with the scenario's concurrency and otherwise
// bee-queue's defaults (stall checks).
const Queue = require('bee-queue');
const c = require('../lib/common');

function queue(o, isWorker) {
  return new Queue(o.queue, {
    redis: { host: o.host, port: o.port },
    isWorker,
    getEvents: false,
    sendEvents: false,
    storeJobs: false,
    removeOnSuccess: true,
    removeOnFailure: true,
    activateDelayedJobs: false,
  });
}

async function enqueue(o) {
  const q = queue(o, false);
  await q.ready();
  const data = JSON.parse(c.payload(0));
  const cpu0 = c.cpuSeconds();
  const t0 = c.nowNs();
  if (o.mode === 'bulk') {
    for (let done = 0; done < o.jobs;) {
      const k = Math.min(1000, o.jobs - done);
      const batch = new Array(k);
      for (let i = 0; i < k; i++) batch[i] = q.createJob(data);
      const errors = await q.saveAll(batch);
      if (errors.size) throw new Error(`saveAll: ${errors.size} jobs failed`);
      done += k;
    }
  } else if (o.mode === 'single') {
    for (let i = 0; i < o.jobs; i++) await q.createJob(data).save();
  } else if (o.mode === 'inflight') {
    let left = o.jobs;
    const producer = async () => {
      while (left > 0) {
        left--;
        await q.createJob(data).save();
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
  const q = queue(o, false);
  await q.ready();
  const cpu0 = c.cpuSeconds();
  const tStart = c.nowNs();
  let acked = 0, errors = 0;
  if (!(o.rate > 0)) {
    const data = JSON.parse(c.payload(0));
    for (let done = 0; done < o.jobs;) {
      const k = Math.min(1000, o.jobs - done);
      const batch = new Array(k);
      for (let i = 0; i < k; i++) batch[i] = q.createJob(data);
      const failed = await q.saveAll(batch);
      errors += failed.size;
      done += k;
    }
    acked = o.jobs - errors;
  } else {
    await c.openLoop(o.jobs, o.rate, () => {
      q.createJob(JSON.parse(c.payload(c.nowNs()))).save().then(() => acked++, () => errors++);
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
  const q = queue(o, true);
  const lat = [];
  let finished = 0, errors = 0, tLast = 0n;
  let resolveDone;
  const done = new Promise((r) => { resolveDone = r; });
  // 'succeeded' is emitted after the finishing MULTI returned: Redis has it.
  q.on('succeeded', () => {
    if (++finished === o.jobs) {
      tLast = c.nowNs();
      resolveDone();
    }
  });
  q.on('failed', () => errors++);
  q.on('error', () => errors++);
  await q.ready();
  c.emit({ ready: true });
  const cpu0 = c.cpuSeconds();
  const tStart = c.nowNs();
  q.process(o.concurrency, async (job) => {
    if (o.latency) lat.push(c.nowNs() - BigInt(job.data.t));
  });
  const timer = setTimeout(resolveDone, o.timeout * 1000);
  await done;
  clearTimeout(timer);
  const cpu = c.cpuSeconds() - cpu0;
  await q.close(5000).catch(() => {});
  const r = {
    jobs: finished, errors, concurrency: o.concurrency, mode: 'worker',
    t_start_ns: tStart.toString(), t_last_ns: tLast.toString(), cpu_s: cpu,
    complete: finished >= o.jobs,
  };
  if (o.latency) r.latency = c.latencySummary(lat);
  return r;
}

module.exports = { enqueue, produce, work };
