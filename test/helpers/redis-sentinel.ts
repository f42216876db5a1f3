// A private Redis set watched by Sentinel, on loopback, for the high-availability tests and
// bench:ha: a primary, a replica of it, and three sentinels (quorum 2) that promote the replica
// when the primary stops answering for DOWN_AFTER_MS. Nothing is kept on disk (as the service's
// Redis is run); every file lives in a temp dir of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { freePort } from './sshd.js';

export const SENTINEL_NAME = 'svcprimary';
/** How long the primary must be silent before the sentinels call it down (Sentinel's down-after-milliseconds). */
export const DOWN_AFTER_MS = 1_000;

export interface SentinelSet {
  /** REDIS_SENTINELS and REDIS_SENTINEL_NAME of the service. */
  env: { REDIS_SENTINELS: string; REDIS_SENTINEL_NAME: string };
  /** host:port of the primary as the sentinels name it now. */
  primary(): Promise<string>;
  /** The port of the primary the sentinels named when last asked (also while they are down). */
  primaryPort(): number;
  /** kill -9 of the data node now primary; resolves with its port. */
  killPrimary(): Promise<number>;
  /** Resolves once the sentinels name another primary than `before` (host:port). */
  waitForNewPrimary(before: string, timeoutMs?: number): Promise<string>;
  /** kill -9 of every sentinel / starting them again on the same ports. */
  killSentinels(): Promise<void>;
  startSentinels(): Promise<void>;
  stop(): Promise<void>;
}

/** One request in Redis's inline protocol on a fresh socket; the first reply, as text. */
export function redisCommand(port: number, command: string, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer to ${command} on ${port}`));
    }, timeoutMs);
    socket.on('data', (chunk) => {
      text += chunk.toString();
      // A reply is complete once its last line ends (enough for the short replies used here).
      if (/\r\n$/.test(text) && !/^\*[1-9]/.test(text.split('\r\n').slice(-3).join(''))) {
        clearTimeout(timer);
        socket.end();
        resolve(text);
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.write(`${command}\r\n`);
  });
}

async function untilAnswers(port: number, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await redisCommand(port, 'PING', 500)).startsWith('+PONG')) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`nothing answers PING on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function launch(cmd: string, args: string[]): ChildProcess {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.resume();
  return child;
}

async function kill(child: ChildProcess | undefined) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

export async function startSentinelSet(): Promise<SentinelSet> {
  const dir = mkdtempSync('/tmp/svc-sentinel-');
  const dataPorts = [await freePort(), await freePort()];
  const sentinelPorts = [await freePort(), await freePort(), await freePort()];
  const data = new Map<number, ChildProcess>();
  const sentinels: ChildProcess[] = [];

  const startData = async (port: number, replicaOf?: number) => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
    if (replicaOf) args.push('--replicaof', '127.0.0.1', String(replicaOf));
    data.set(port, launch('redis-server', args));
    await untilAnswers(port);
  };
  await startData(dataPorts[0]!);
  await startData(dataPorts[1]!, dataPorts[0]);

  // Each sentinel rewrites its own file (what it learned): written once, before the first start.
  for (const [i, port] of sentinelPorts.entries()) {
    writeFileSync(
      path.join(dir, `sentinel-${i}.conf`),
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${dataPorts[0]} 2`,
        `sentinel down-after-milliseconds ${SENTINEL_NAME} ${DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${SENTINEL_NAME} 10000`,
        `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
        '',
      ].join('\n'),
    );
  }
  const startSentinels = async () => {
    for (const [i, port] of sentinelPorts.entries()) {
      sentinels[i] = launch('redis-sentinel', [path.join(dir, `sentinel-${i}.conf`)]);
      await untilAnswers(port);
    }
  };
  await startSentinels();

  let lastPrimary = dataPorts[0]!;
  const primary = async (): Promise<string> => {
    for (const port of sentinelPorts) {
      try {
        const reply = await redisCommand(port, `SENTINEL get-master-addr-by-name ${SENTINEL_NAME}`);
        const [host, p] = reply
          .split('\r\n')
          .filter((l) => l && !/^[*$]/.test(l))
          .slice(0, 2);
        if (host && p) {
          lastPrimary = Number(p);
          return `${host}:${p}`;
        }
      } catch {
        // that sentinel is down: ask the next
      }
    }
    throw new Error('no sentinel names a primary');
  };

  return {
    env: { REDIS_SENTINELS: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','), REDIS_SENTINEL_NAME: SENTINEL_NAME },
    primary,
    primaryPort: () => lastPrimary,
    async killPrimary() {
      const port = Number((await primary()).split(':')[1]);
      await kill(data.get(port));
      return port;
    },
    async waitForNewPrimary(before, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const now = await primary().catch(() => before);
        if (now !== before) return now;
        if (Date.now() > deadline) throw new Error(`the sentinels still name ${before} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async killSentinels() {
      await Promise.all(sentinels.map(kill));
    },
    startSentinels,
    async stop() {
      await Promise.all([...sentinels.map(kill), ...[...data.values()].map(kill)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
