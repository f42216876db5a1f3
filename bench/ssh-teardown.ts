// npm run bench:ssh-teardown [-- 200]
// What a killed worker's monitoring sessions cost the server side to end: a child process opens N
// connections to the local test sshd, each with a streaming channel running the monitoring loop
// (as a monitor runner holds them), and is SIGKILLed; this prints how long until every session's
// processes are gone and the machine CPU spent meanwhile. In bench:monitor --failover all the
// simulated servers are on this one machine, so this cost lands on the same cores as the worker.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connectSsh, type SshTarget } from '../src/core/ssh.js';
import { STREAM_COMMAND } from '../src/monitoring/proc-metrics.js';
import { sshTarget, startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { machineCpu } from './fleet.js';

const N = Number(process.argv[2] ?? 200);
if (!Number.isInteger(N) || N < 1) throw new Error(`expected a number of sessions, got ${process.argv[2]}`);

const processes = () => readFileSync('/proc/loadavg', 'utf8').split(' ')[3]!.split('/').map(Number)[1]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The child: opens the sessions, 20 at a time, and keeps them (their sockets keep it running) until killed. */
async function holdSessions(target: SshTarget) {
  for (let i = 0; i < N; i += 20) {
    const batch = Array.from({ length: Math.min(20, N - i) }, async () => {
      const conn = await connectSsh(target, { connectTimeoutMs: 60_000 });
      await conn.stream(STREAM_COMMAND, { timeoutMs: 60_000 });
    });
    await Promise.all(batch);
  }
  process.send!('ready');
}

async function main() {
  const sshd = await startSshd({ maxStartups: 500, maxSessions: 10 });
  try {
    const target = sshTarget(sshd, { username: TEST_USERS.key.name, password: null, privateKey: sshd.keys.ed25519Openssh });
    const before = processes();
    const child = fork(import.meta.filename, [String(N), JSON.stringify(target)], { execArgv: ['--import', 'tsx'] });
    await new Promise((r) => child.once('message', r));
    await sleep(3000);
    const withSessions = processes();
    const cpu = machineCpu();
    const killedAt = Date.now();
    child.kill('SIGKILL');
    while (processes() > before + 1) await sleep(50);
    const seconds = machineCpu() - cpu;
    console.log(
      `${N} sessions (${withSessions - before} processes with the client): all ended ${Date.now() - killedAt} ms after the kill; ` +
        `machine CPU ${seconds.toFixed(2)} s, ${((seconds / N) * 1000).toFixed(1)} ms per session`,
    );
  } finally {
    await sshd.stop();
  }
}

if (process.argv[3]) holdSessions(JSON.parse(process.argv[3]) as SshTarget);
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
