// A monitored host that lies: ssh2's own SSH server on loopback, accepting any password, whose
// answers to the monitoring commands (the streaming loop and the per-poll command) are what the
// test says. It stands for a remote party that sends crafted /proc contents or endless output; the
// service's side (ssh2 client, stream, parser, batch writes) is the real one.
import type { AddressInfo } from 'node:net';
import type { Writable } from 'node:stream';
import ssh2, { type ServerChannel } from 'ssh2';
import { SAMPLE_COMMAND, STREAM_COMMAND, TWO_SAMPLES_COMMAND } from '../../src/monitoring/proc-metrics.js';

/** How the host answers the monitoring commands. */
export interface FakeMonitoredHost {
  /** Written first on the streaming channel (default: "@@ready\n"). */
  ready?: (channel: ServerChannel) => void;
  /** One sample's text (the sections after "@@sample", without "@@end"), asked afresh for each request. */
  sample: () => string;
}

export interface FakeSshHost {
  host: string;
  port: number;
  /** Streaming channels opened so far. */
  streams(): number;
  close(): Promise<void>;
}

/** Writes `bytes` of `fill` in 32 KiB pieces (what a channel carries per packet), stopping when the channel goes. */
export function writeFlood(channel: Pick<Writable, 'write' | 'destroyed'>, bytes: number, fill = 'x'): void {
  const piece = fill.repeat(32 * 1024);
  for (let sent = 0; sent < bytes && !channel.destroyed; sent += piece.length) channel.write(piece.slice(0, bytes - sent));
}

/** /proc and df output in the format of the real files, with `over` replacing any section's lines. */
export function procSections(over: Partial<Record<'uptime' | 'stat' | 'meminfo' | 'net' | 'loadavg' | 'df', string>> = {}): string {
  const s = {
    uptime: `${(process.uptime() + 1000).toFixed(2)} 7321.04`,
    stat: `cpu  ${Math.round(process.uptime() * 100) + 1000} 0 500 8000 500 0 0 0 0 0`,
    meminfo: ['MemTotal:       8000000 kB', 'MemFree:         100000 kB', 'MemAvailable:   6000000 kB'].join('\n'),
    net: ['Inter-|   Receive', ' face |bytes', '  eth0: 1000 4 0 0 0 0 0 0 2000 3 0 0 0 0 0 0'].join('\n'),
    loadavg: '0.10 0.20 0.30 1/100 1234',
    df: 'Filesystem     1024-blocks     Used Available Capacity Mounted on\n/dev/vda 1000000 400000 500000 45% /',
    ...over,
  };
  return [
    `@/proc/uptime\n${s.uptime}`,
    `@/proc/stat\n${s.stat}`,
    `@/proc/meminfo\n${s.meminfo}`,
    `@/proc/net/dev\n${s.net}`,
    `@/proc/loadavg\n${s.loadavg}`,
    `@df\n${s.df}`,
    '',
  ].join('\n');
}

/**
 * An ed25519 host key ssh2 can read back: its own generator writes one it then calls malformed about
 * once in 270 keys (11 of 3,000 here), which failed a test file now and then.
 */
function hostKeyOf(): string {
  for (;;) {
    const key = ssh2.utils.generateKeyPairSync('ed25519').private;
    if (!(ssh2.utils.parseKey(key) instanceof Error)) return key;
  }
}

export async function startFakeSshHost(answers: FakeMonitoredHost): Promise<FakeSshHost> {
  const hostKey = hostKeyOf();
  let streams = 0;
  const clients = new Set<ssh2.Connection>();
  const server = new ssh2.Server({ hostKeys: [hostKey] }, (client) => {
    clients.add(client);
    client.on('close', () => clients.delete(client));
    client.on('error', () => {});
    client.on('authentication', (auth) => (auth.method === 'password' ? auth.accept() : auth.reject(['password'])));
    client.on('session', (acceptSession) => {
      acceptSession().on('exec', (accept, reject, info) => {
        if (info.command === STREAM_COMMAND) {
          streams++;
          const channel = accept();
          channel.on('error', () => {});
          if (answers.ready) answers.ready(channel);
          else channel.write('@@ready\n');
          // Each line written asks for one sample (the loop's `read`).
          channel.on('data', (data: Buffer) => {
            for (const c of data) if (c === 0x0a && !channel.destroyed) channel.write(`@@sample\n${answers.sample()}@@end\n`);
          });
          return;
        }
        if (info.command === SAMPLE_COMMAND || info.command === TWO_SAMPLES_COMMAND) {
          const channel = accept();
          const count = info.command === SAMPLE_COMMAND ? 1 : 2;
          for (let i = 0; i < count; i++) channel.write(`@@sample\n${answers.sample()}`);
          channel.exit(0);
          channel.end();
          return;
        }
        reject();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    streams: () => streams,
    close: () => {
      for (const c of clients) c.end();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
