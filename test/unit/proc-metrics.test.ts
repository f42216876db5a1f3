// The metrics parser and the server_state rule on known /proc input (pure functions), plus the real
// metrics command run by the local shell on this machine's own /proc and df, parsed back.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  computeMetrics,
  MetricsParseError,
  parseSample,
  parseSamples,
  SAMPLE_COMMAND,
  serverStateOf,
  TWO_SAMPLES_COMMAND,
} from '../../src/monitoring/proc-metrics.js';
import type { Metrics } from '../../src/servers/root-server-metrics.js';

interface Known {
  uptime: number;
  cpu: number[];
  memTotalKb: number;
  memAvailableKb?: number;
  rx: number;
  tx: number;
  df?: string;
}

/** The metrics command's output for given counters, in the format of the real files. */
function sample(k: Known): string {
  const mem = [`MemTotal:       ${k.memTotalKb} kB`, 'MemFree:          100000 kB'];
  if (k.memAvailableKb !== undefined) mem.push(`MemAvailable:   ${k.memAvailableKb} kB`);
  mem.push('Buffers:           50000 kB', 'Cached:           250000 kB');
  return [
    '@@sample',
    '@/proc/uptime',
    `${k.uptime.toFixed(2)} 7321.04`,
    '@/proc/stat',
    `cpu  ${k.cpu.join(' ')}`,
    '@/proc/meminfo',
    ...mem,
    '@/proc/net/dev',
    'Inter-|   Receive                                                |  Transmit',
    ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed',
    `    lo: 99999999   52744    0    0    0     0          0         0 99999999   52744    0    0    0     0       0          0`,
    `  eth0: ${k.rx}   46460    0    0    0     0          0         0 ${k.tx}   32193    0    0    0     0       0          0`,
    `  eth1: 1000   4    0    0    0     0          0         0 2000   3    0    0    0     0       0          0`,
    '@/proc/loadavg',
    '1.45 0.99 0.70 3/165 25604',
    '@df',
    'Filesystem     1024-blocks     Used Available Capacity Mounted on',
    k.df ?? '/dev/vda         264212084 26576264  79814648      25% /',
    '',
  ].join('\n');
}

const base: Known = {
  uptime: 1000,
  cpu: [1000, 0, 500, 8000, 500, 0, 0, 0, 0, 0],
  memTotalKb: 8_000_000,
  memAvailableKb: 6_000_000,
  rx: 10_000_000,
  tx: 2_000_000,
};

describe('parseSample', () => {
  it('reads every section of known input', () => {
    expect(parseSample(sample(base))).toEqual({
      uptime: 1000,
      cpuTotal: 10_000,
      cpuIdle: 8500, // idle + iowait
      memTotal: 8_000_000 * 1024,
      memAvailable: 6_000_000 * 1024,
      netRx: 10_001_000, // eth0 + eth1, loopback left out
      netTx: 2_002_000,
      load: [1.45, 0.99, 0.7],
      diskTotal: 264212084 * 1024,
      diskUsed: 26576264 * 1024,
      diskAvailable: 79814648 * 1024,
    });
  });

  it('old kernels without MemAvailable: free + buffers + cached', () => {
    const s = parseSample(sample({ ...base, memAvailableKb: undefined }));
    expect(s.memAvailable).toBe((100000 + 50000 + 250000) * 1024);
  });

  it('a filesystem name with spaces is read from the right', () => {
    const s = parseSample(sample({ ...base, df: 'my disk name   1000 400 500 45% /' }));
    expect([s.diskTotal, s.diskUsed, s.diskAvailable]).toEqual([1000 * 1024, 400 * 1024, 500 * 1024]);
  });

  it('refuses output it cannot read', () => {
    expect(() => parseSample(sample(base).replace(/@\/proc\/stat\ncpu .*\n/, ''))).toThrow(MetricsParseError);
    expect(() => parseSample(sample(base).replace('MemTotal:       8000000 kB', 'MemTotal: lots kB'))).toThrow('Unreadable MemTotal: lots');
    expect(() => parseSamples('bash: awk: command not found')).toThrow('No sample in the metrics output');
  });

  it('refuses values the files never hold or the monitor log cannot store (a bad sample is a failed poll)', () => {
    const bad = (from: string, to: string) => () => parseSample(sample(base).replace(from, to));
    const mem = 'MemTotal:       8000000 kB';
    // Byte counts go to bigint columns: whole kB only, and few enough that bytes stay below 2^63.
    expect(bad(mem, 'MemTotal: 0.3 kB')).toThrow('Unreadable MemTotal: 0.3');
    expect(bad(mem, 'MemTotal: 99999999999999999 kB')).toThrow('MemTotal out of range: 99999999999999999');
    expect(bad(mem, 'MemTotal: 1e308 kB')).toThrow('Unreadable MemTotal: 1e308');
    expect(bad(mem, 'MemTotal: -8000000 kB')).toThrow('Unreadable MemTotal: -8000000');
    expect(bad('264212084', '2.5e8')).toThrow('Unreadable df column: 2.5e8');
    expect(bad('26576264', 'Infinity')).toThrow('Unreadable df column: Infinity');
    expect(bad('1.45 0.99', '1e308 0.99')).toThrow('Unreadable load: 1e308');
    expect(bad('1.45 0.99', `${'9'.repeat(400)} 0.99`)).toThrow(`load out of range: ${'9'.repeat(40)}`);
    expect(bad('1000.00 7321.04', '0x10 7321.04')).toThrow('Unreadable uptime: 0x10');
    expect(bad('cpu  1000', 'cpu  1000.5')).toThrow('Unreadable cpu counter: 1000.5');
    expect(bad('eth0: 10000000', 'eth0: 1e7')).toThrow('Unreadable eth0 rx bytes: 1e7');
    // The largest values that fit: 2^53 − 1 kB is just below 2^63 bytes; counters are 64-bit.
    const most = parseSample(
      sample({ ...base, memTotalKb: Number.MAX_SAFE_INTEGER }).replace('eth0: 10000000', 'eth0: 18446744073709551615'),
    );
    expect(most.memTotal).toBe(Number.MAX_SAFE_INTEGER * 1024);
    expect(BigInt(most.memTotal)).toBeLessThan(2n ** 63n);
    expect(most.netRx).toBeGreaterThan(1.8e19);
  });
});

describe('computeMetrics', () => {
  it('CPU % and network bytes/s from the deltas of two samples, over the server’s own uptime', () => {
    const prev = parseSample(sample(base));
    // 5 s later: 1000 jiffies more, of which 250 idle+iowait → 75 % busy; eth0 received 5 MB, sent 1 MB.
    const cur = parseSample(
      sample({ ...base, uptime: 1005, cpu: [1600, 0, 650, 8200, 550, 0, 0, 0, 0, 0], rx: 15_000_000, tx: 3_000_000 }),
    );
    expect(computeMetrics(prev, cur)).toEqual<Metrics>({
      cpu_percent: 75,
      ram_used_bytes: 2_000_000 * 1024,
      ram_total_bytes: 8_000_000 * 1024,
      ram_percent: 25,
      disk_used_bytes: 26576264 * 1024,
      disk_total_bytes: 264212084 * 1024,
      disk_percent: 24.98, // used / (used + available), as df's Capacity
      net_rx_bytes_per_s: 1_000_000,
      net_tx_bytes_per_s: 200_000,
      load_1: 1.45,
      load_5: 0.99,
      load_15: 0.7,
    });
  });

  it('without a previous sample, or after a reboot, CPU and network are averages since boot', () => {
    const cur = parseSample(sample(base));
    const sinceBoot = computeMetrics(null, cur);
    expect(sinceBoot.cpu_percent).toBe(15); // 1 - 8500/10000
    expect(sinceBoot.net_rx_bytes_per_s).toBe(10_001); // 10,001,000 bytes over 1000 s
    const rebooted = parseSample(sample({ ...base, uptime: 20, cpu: [10, 0, 10, 60, 20, 0, 0, 0, 0, 0], rx: 4000, tx: 1000 }));
    expect(computeMetrics(cur, rebooted)).toMatchObject({ cpu_percent: 20, net_rx_bytes_per_s: 250, net_tx_bytes_per_s: 150 });
  });
});

describe('figures within what the monitor log holds', () => {
  it('percents stay within 0–100 and rates finite, whatever the counters did', () => {
    const prev = parseSample(sample({ ...base, uptime: 1000, cpu: [100, 0, 0, 50] }));
    // More idle time than time passed (user went backwards): 0 % busy, not a negative figure.
    const cur = parseSample(sample({ ...base, uptime: 1005, cpu: [90, 0, 0, 70] }));
    expect(computeMetrics(prev, cur).cpu_percent).toBe(0);
    // Uptimes a hair apart: a finite rate (at most 2^64 bytes/s), not Infinity.
    const tiny = (uptime: string, rx: string) =>
      parseSample(sample(base).replace('1000.00 7321.04', `${uptime} 1`).replace('eth0: 10000000', `eth0: ${rx}`));
    const m = computeMetrics(tiny(`0.${'0'.repeat(300)}1`, '0'), tiny(`0.${'0'.repeat(300)}2`, '18446744073709551615'));
    expect(m.net_rx_bytes_per_s).toBe(2 ** 64);
    for (const v of Object.values(m)) expect(Number.isFinite(v)).toBe(true);
  });
});

describe('server_state', () => {
  const metrics = (cpu: number, ram: number, disk: number) =>
    ({ ...computeMetrics(null, parseSample(sample(base))), cpu_percent: cpu, ram_percent: ram, disk_percent: disk }) as Metrics;

  it('warning at 90 % or more of CPU, RAM or disk; online below', () => {
    expect(serverStateOf(metrics(89.99, 89.99, 89.99))).toBe('online');
    expect(serverStateOf(metrics(90, 10, 10))).toBe('warning');
    expect(serverStateOf(metrics(10, 90, 10))).toBe('warning');
    expect(serverStateOf(metrics(10, 10, 90))).toBe('warning');
    expect(serverStateOf(metrics(100, 100, 100))).toBe('warning');
  });

  it('from known /proc input: 95 % CPU busy → warning; full disk → warning', () => {
    const prev = parseSample(sample(base));
    const busy = parseSample(sample({ ...base, uptime: 1005, cpu: [1900, 0, 550, 8050, 500, 0, 0, 0, 0, 0] }));
    expect(computeMetrics(prev, busy).cpu_percent).toBe(95);
    expect(serverStateOf(computeMetrics(prev, busy))).toBe('warning');
    const full = parseSample(sample({ ...base, df: '/dev/vda 1000 910 90 91% /' }));
    expect(serverStateOf(computeMetrics(null, full))).toBe('warning');
    const fullRam = parseSample(sample({ ...base, memAvailableKb: 400_000 }));
    expect(computeMetrics(null, fullRam).ram_percent).toBe(95);
  });
});

describe('the metrics command on this machine', () => {
  it('runs in sh and parses into sane values', () => {
    const one = parseSamples(execFileSync('sh', ['-c', SAMPLE_COMMAND], { encoding: 'utf8' }));
    expect(one).toHaveLength(1);
    const two = parseSamples(execFileSync('sh', ['-c', TWO_SAMPLES_COMMAND], { encoding: 'utf8' }));
    expect(two).toHaveLength(2);
    const m = computeMetrics(two[0]!, two[1]!);
    const memTotalKb = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]);
    expect(m.ram_total_bytes).toBe(memTotalKb * 1024);
    expect(two[1]!.uptime - two[0]!.uptime).toBeGreaterThanOrEqual(0.9);
    for (const p of [m.cpu_percent, m.ram_percent, m.disk_percent]) {
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThanOrEqual(100);
    }
    expect(m.disk_total_bytes).toBeGreaterThan(m.disk_used_bytes);
    expect(m.net_rx_bytes_per_s).toBeGreaterThanOrEqual(0);
  });
});
