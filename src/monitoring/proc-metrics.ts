// Agentless metrics (nothing installed on the server): one remote command prints /proc/uptime, the `cpu` line of
// /proc/stat, /proc/meminfo's totals, /proc/net/dev, /proc/loadavg and `df -Pk /`, each section
// headed by "@<file>". CPU % and network bytes/s are deltas between two samples; the time base is
// the server's own uptime, so the service's scheduling jitter does not skew the rates.
import type { Metrics } from '../servers/index.js';

const SAMPLE_AWK =
  `awk 'FNR==1{print "@" FILENAME} ` +
  `FILENAME=="/proc/stat"{if(/^cpu /)print;next} ` +
  `FILENAME=="/proc/meminfo"{if(/^(MemTotal|MemAvailable|MemFree|Buffers|Cached):/)print;next} {print}' ` +
  '/proc/uptime /proc/stat /proc/meminfo /proc/net/dev /proc/loadavg && echo @df && df -Pk /';

/** One sample: used when the previous sample of the server is known. */
export const SAMPLE_COMMAND = `echo @@sample; ${SAMPLE_AWK}`;
/** Two samples a second apart: the first poll of a server, when no previous sample exists. */
export const TWO_SAMPLES_COMMAND = `${SAMPLE_COMMAND}; sleep 1; ${SAMPLE_COMMAND}`;

/**
 * The streaming form (one long-lived channel per server): a POSIX shell loop that, for every line
 * the service writes to its input, prints one sample in the same sections as SAMPLE_COMMAND,
 * ended by "@@end". /proc is read with the shell's own `read`, `case` and `echo` (no process per
 * sample but `df`); the same lines as the awk filter are kept. "@@ready" first says the loop runs.
 */
export const STREAM_SCRIPT = [
  'echo @@ready',
  'while read -r _; do',
  'echo @@sample',
  'echo @/proc/uptime; read -r l < /proc/uptime; echo "$l"',
  'echo @/proc/stat; while read -r l; do case $l in "cpu "*) echo "$l"; break;; esac; done < /proc/stat',
  // Cached comes after the other four in every kernel's meminfo: the rest is not read (the shell's
  // `read` takes one byte per system call).
  'echo @/proc/meminfo; while read -r l; do case $l in MemTotal:*|MemAvailable:*|MemFree:*|Buffers:*) echo "$l";; Cached:*) echo "$l"; break;; esac; done < /proc/meminfo',
  'echo @/proc/net/dev; while read -r l; do echo "$l"; done < /proc/net/dev',
  'echo @/proc/loadavg; read -r l < /proc/loadavg; echo "$l"',
  'echo @df; df -Pk /',
  'echo @@end',
  'done',
].join('\n');

/** The command that starts STREAM_SCRIPT under sh, whatever the login shell. */
export const STREAM_COMMAND = `exec sh -c '${STREAM_SCRIPT.replaceAll("'", "'\\''")}'`;

const WARNING_PERCENT = 90;

export interface ProcSample {
  /** Seconds since boot (/proc/uptime). */
  uptime: number;
  cpuTotal: number;
  cpuIdle: number;
  memTotal: number;
  memAvailable: number;
  /** Bytes over every interface but loopback. */
  netRx: number;
  netTx: number;
  load: [number, number, number];
  diskTotal: number;
  diskUsed: number;
  diskAvailable: number;
}

export class MetricsParseError extends Error {
  override name = 'MetricsParseError';
}

// What a sample may hold. A remote party's values are checked here, before any reaches a batch
// write: a value the monitor log cannot store would fail the whole batch, so it fails only this
// server's poll instead.
/** kB and df's 1024-blocks (stored as bytes in bigint columns): up to 2^53 − 1, so bytes stay exact and below 2^63. */
const MAX_KB = Number.MAX_SAFE_INTEGER;
/** The kernel's counters (CPU jiffies, interface bytes) are 64-bit. */
const MAX_COUNTER = 2 ** 64;
/** Uptime (seconds) and load averages: far above any real value. */
const MAX_DECIMAL = 1e12;
/** Unsigned decimal integers and decimals, as /proc and df print them (no sign, exponent or hex). */
const INTEGER = /^\d+$/;
const DECIMAL = /^\d+(?:\.\d+)?$/;

function num(value: string | undefined, what: string, max: number, form = INTEGER): number {
  const readable = value !== undefined && form.test(value);
  const n = readable ? Number(value) : Number.NaN;
  if (n <= max) return n;
  // Shown in the server's chatter: the remote party's text, cut short.
  const [name, shown] = [what.slice(0, 40), (value ?? '(missing)').slice(0, 40)];
  throw new MetricsParseError(readable ? `${name} out of range: ${shown}` : `Unreadable ${name}: ${shown}`);
}

function sections(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current: string[] | null = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('@')) {
      current = [];
      out.set(line.slice(1).trim(), current);
    } else if (current && line.trim()) current.push(line);
  }
  return out;
}

/** Parses one sample (the text after an "@@sample" line). */
export function parseSample(text: string): ProcSample {
  const s = sections(text);
  const need = (name: string) => {
    const lines = s.get(name);
    if (!lines || lines.length === 0) throw new MetricsParseError(`Missing ${name} in the metrics output`);
    return lines;
  };

  const uptime = num(need('/proc/uptime')[0]!.trim().split(/\s+/)[0], 'uptime', MAX_DECIMAL, DECIMAL);

  const cpu = need('/proc/stat')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map((v) => num(v, 'cpu counter', MAX_COUNTER));
  if (cpu.length < 4) throw new MetricsParseError('Unreadable cpu line of /proc/stat');
  // user nice system idle iowait irq softirq steal (guest time is already counted in user).
  const cpuTotal = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  const cpuIdle = cpu[3]! + (cpu[4] ?? 0);

  const mem = new Map(
    need('/proc/meminfo').map((line) => {
      const [key, value] = line.split(':');
      return [key!.trim(), num(value?.trim().split(/\s+/)[0], key!, MAX_KB) * 1024];
    }),
  );
  const memTotal = mem.get('MemTotal');
  if (!memTotal) throw new MetricsParseError('Missing MemTotal in /proc/meminfo');
  // MemAvailable exists since Linux 3.14; older kernels: free + buffers + page cache.
  const memAvailable = mem.get('MemAvailable') ?? (mem.get('MemFree') ?? 0) + (mem.get('Buffers') ?? 0) + (mem.get('Cached') ?? 0);

  let netRx = 0;
  let netTx = 0;
  for (const line of need('/proc/net/dev')) {
    const colon = line.indexOf(':');
    if (colon < 0) continue; // the two header lines
    const name = line.slice(0, colon).trim();
    if (name === 'lo') continue;
    const fields = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/);
    netRx += num(fields[0], `${name} rx bytes`, MAX_COUNTER);
    netTx += num(fields[8], `${name} tx bytes`, MAX_COUNTER);
  }

  const loadFields = need('/proc/loadavg')[0]!.trim().split(/\s+/);
  const load: [number, number, number] = [
    num(loadFields[0], 'load', MAX_DECIMAL, DECIMAL),
    num(loadFields[1], 'load', MAX_DECIMAL, DECIMAL),
    num(loadFields[2], 'load', MAX_DECIMAL, DECIMAL),
  ];

  // "Filesystem 1024-blocks Used Available Capacity Mounted-on"; read from the right, as the
  // filesystem name may contain spaces.
  const df = need('df').filter((l) => !l.startsWith('Filesystem'));
  const cols = df[df.length - 1]?.trim().split(/\s+/) ?? [];
  if (cols.length < 6) throw new MetricsParseError('Unreadable df output');
  const [blocks, used, avail] = cols.slice(-5, -2).map((v) => num(v, 'df column', MAX_KB) * 1024) as [number, number, number];

  return { uptime, cpuTotal, cpuIdle, memTotal, memAvailable, netRx, netTx, load, diskTotal: blocks, diskUsed: used, diskAvailable: avail };
}

/** Every sample in a command's output, in order. */
export function parseSamples(output: string): ProcSample[] {
  const parts = output.split(/^@@sample$/m).slice(1);
  if (parts.length === 0) throw new MetricsParseError('No sample in the metrics output');
  return parts.map(parseSample);
}

const round2 = (n: number) => Math.round(n * 100) / 100;
/** Within 0–100 whatever the counters did (e.g. more idle time than time passed). */
const percent = (part: number, whole: number) => (whole > 0 ? round2(Math.min(100, Math.max(0, (part / whole) * 100))) : 0);

/**
 * Metrics of `cur`, with CPU and network as deltas from `prev`. Without a usable `prev` (none, or
 * counters that went backwards after a reboot) they are averages since boot.
 */
export function computeMetrics(prev: ProcSample | null, cur: ProcSample): Metrics {
  const usable = prev !== null && cur.uptime > prev.uptime && cur.cpuTotal > prev.cpuTotal && cur.cpuIdle >= prev.cpuIdle;
  const base = usable ? prev : { uptime: 0, cpuTotal: 0, cpuIdle: 0, netRx: 0, netTx: 0 };
  const seconds = cur.uptime - base.uptime;
  const busy = cur.cpuTotal - base.cpuTotal - (cur.cpuIdle - base.cpuIdle);
  // Finite however close two uptimes are: no counter moves more than 2^64 bytes.
  const rate = (now: number, before: number) =>
    seconds > 0 && now >= before ? round2(Math.min(MAX_COUNTER, (now - before) / seconds)) : 0;
  const ramUsed = Math.max(0, cur.memTotal - cur.memAvailable);
  return {
    cpu_percent: percent(busy, cur.cpuTotal - base.cpuTotal),
    ram_used_bytes: ramUsed,
    ram_total_bytes: cur.memTotal,
    ram_percent: percent(ramUsed, cur.memTotal),
    disk_used_bytes: cur.diskUsed,
    disk_total_bytes: cur.diskTotal,
    // As df's Capacity: used of what non-root users can have (reserved blocks excluded).
    disk_percent: percent(cur.diskUsed, cur.diskUsed + cur.diskAvailable),
    net_rx_bytes_per_s: rate(cur.netRx, base.netRx),
    net_tx_bytes_per_s: rate(cur.netTx, base.netTx),
    load_1: cur.load[0],
    load_5: cur.load[1],
    load_15: cur.load[2],
  };
}

/** `warning` when CPU, RAM or disk is at or above 90 %, else `online`. */
export function serverStateOf(m: Metrics): 'online' | 'warning' {
  return m.cpu_percent >= WARNING_PERCENT || m.ram_percent >= WARNING_PERCENT || m.disk_percent >= WARNING_PERCENT ? 'warning' : 'online';
}
