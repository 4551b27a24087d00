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

// Runs `scenario` (c.enqueueJobs or c.produceJobs) on a fresh Queue.
async function withQueue(o, scenario) {
  const q = new Queue(o.queue, { connection: connection(o), defaultJobOptions: JOB_OPTS });
  await q.waitUntilReady();
  const r = await scenario(o, {
    addOne: (data) => q.add('job', data),
    addChunk: async (data, k) => {
      await q.addBulk(Array.from({ length: k }, () => ({ name: 'job', data, opts: JOB_OPTS })));
      return 0;  // addBulk fails as a whole
    },
  });
  await q.close();
  return r;
}

async function work(o) {
  const t = c.workerTally(o);
  const w = new Worker(o.queue, t.handler, {
    connection: connection(o), concurrency: o.concurrency, autorun: false,
    removeOnComplete: { count: 0 }, removeOnFail: { count: 0 },
  });
  // 'completed' is emitted after moveToCompleted returned: Redis has it.
  w.on('completed', t.finished);
  w.on('failed', t.failed);
  w.on('error', t.failed);
  await w.waitUntilReady();
  return t.run(() => w.run().catch(t.failed), () => w.close(true));
}

module.exports = {
  enqueue: (o) => withQueue(o, c.enqueueJobs),
  produce: (o) => withQueue(o, c.produceJobs),
  work,
};
