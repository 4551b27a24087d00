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

// Runs `scenario` (c.enqueueJobs or c.produceJobs) on a fresh producer queue.
async function withQueue(o, scenario) {
  const q = queue(o, false);
  await q.ready();
  const r = await scenario(o, {
    addOne: (data) => q.createJob(data).save(),
    // saveAll resolves to a Map of the jobs that failed.
    addChunk: async (data, k) =>
      (await q.saveAll(Array.from({ length: k }, () => q.createJob(data)))).size,
  });
  await q.close();
  return r;
}

async function work(o) {
  const q = queue(o, true);
  const t = c.workerTally(o);
  // 'succeeded' is emitted after the finishing MULTI returned: Redis has it.
  q.on('succeeded', t.finished);
  q.on('failed', t.failed);
  q.on('error', t.failed);
  await q.ready();
  return t.run(() => q.process(o.concurrency, t.handler),
    () => q.close(5000).catch(() => {}));
}

module.exports = {
  enqueue: (o) => withQueue(o, c.enqueueJobs),
  produce: (o) => withQueue(o, c.produceJobs),
  work,
};
