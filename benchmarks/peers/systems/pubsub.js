'use strict';
// The nearest Node.js equivalent of a feed publish -> subscriber callback:
// plain ioredis PUBLISH / SUBSCRIBE on one channel (what bee-queue's and
// BullMQ's own pub/sub notifications are built on). It stores nothing,
// where a feed publish also stores the item (and its id and time).
const Redis = require('ioredis');
const c = require('../lib/common');

async function subscribe(o) {
  const channel = `${o.queue}.feed`;
  const lat = [];
  const subs = [];
  for (let i = 0; i < o.subscribers; i++) {
    const s = new Redis({ host: o.host, port: o.port });
    s.on('message', (_ch, msg) => lat.push(c.nowNs() - c.stampOf(msg)));
    await s.subscribe(channel);
    subs.push(s);
  }
  c.emit({ ready: true });
  const want = o.messages * o.subscribers;
  const complete = await c.waitFor(() => lat.length >= want, o.timeout * 1000);
  const r = { subscribers: o.subscribers, received: lat.length, complete, latency: c.latencySummary(lat) };
  for (const s of subs) s.disconnect();
  return r;
}

async function publish(o) {
  const channel = `${o.queue}.feed`;
  const p = new Redis({ host: o.host, port: o.port });
  await p.ping();
  let acked = 0, errors = 0;
  const cpu0 = c.cpuSeconds();
  const secs = await c.openLoop(o.messages, o.rate, () => {
    p.publish(channel, c.payload(c.nowNs())).then(() => acked++, () => errors++);
  });
  await c.waitFor(() => acked + errors >= o.messages, 10000);
  const cpu = c.cpuSeconds() - cpu0;
  p.disconnect();
  return { sent: o.messages, acked, errors, rate_achieved: o.messages / secs, cpu_s: cpu, complete: acked === o.messages };
}

module.exports = { subscribe, publish };
