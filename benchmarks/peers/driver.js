'use strict';
// One role of one Node.js system, as benchmarks/peer_scenarios.cpp does
// for this library:  node driver.js SYSTEM ROLE --url URL [options]
// SYSTEM: bullmq | beequeue (enqueue, produce, work) or pubsub (subscribe,
// publish). Prints {"ready":true} for waiting roles, then one JSON line.
const c = require('./lib/common');

const SYSTEMS = {
  bullmq: () => require('./systems/bullmq'),
  beequeue: () => require('./systems/beequeue'),
  pubsub: () => require('./systems/pubsub'),
};

async function main() {
  const [system, role, ...rest] = process.argv.slice(2);
  if (!SYSTEMS[system]) throw new Error(`unknown system ${system} (${Object.keys(SYSTEMS).join(', ')})`);
  const impl = SYSTEMS[system]();
  if (typeof impl[role] !== 'function') throw new Error(`${system} has no role ${role}`);
  const o = c.parseArgs(rest);
  const limit = setTimeout(() => {
    c.emit({ complete: false, error: 'time limit' });
    process.exit(2);
  }, (o.timeout + 30) * 1000);
  const r = await impl[role](o);
  clearTimeout(limit);
  c.emit(r);
  // Libraries may keep timers or sockets open after close(): the result
  // is out, so leave.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`driver: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
