// CPU seconds of what serves a visitor in bench:odoo, from /proc (user + system, children reaped
// included): process trees (the host's Odoo: master, workers, gevent; the bench's sshd: every
// command svc ran on the host), and PostgreSQL backends of the bench's own databases, sampled
// (a backend's CPU is read while it lives: one that ends between two samples loses at most a
// sample's worth). Other users of the machine's PostgreSQL are left out; so are its background
// processes (checkpointer, WAL writer, autovacuum), which nothing attributes to one database.
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

interface Proc {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime (ticks): its own and that of the children it reaped. */
  ticks: number;
  own: number;
  cmdline: string;
}

function readProc(pid: number): Proc | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const own = Number(fields[11]) + Number(fields[12]);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    return { pid, ppid: Number(fields[1]), own, ticks: own + Number(fields[13]) + Number(fields[14]), cmdline };
  } catch {
    return null; // ended meanwhile
  }
}

function allProcs(): Proc[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map((p) => readProc(Number(p)))
    .filter((p): p is Proc => p !== null);
}

/** CPU seconds of the processes whose command line contains `marker` and of all their descendants. */
export function treeCpu(marker: string): number {
  const procs = allProcs();
  const children = new Map<number, Proc[]>();
  for (const p of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const seen = new Set<number>();
  const walk = (p: Proc) => {
    if (seen.has(p.pid)) return;
    seen.add(p.pid);
    for (const c of children.get(p.pid) ?? []) walk(c);
  };
  for (const p of procs) if (p.cmdline.includes(marker)) walk(p);
  let ticks = 0;
  for (const p of procs) if (seen.has(p.pid)) ticks += p.ticks;
  return ticks / TICKS_PER_SECOND;
}

/** PostgreSQL backends ("postgres: <cluster>: <user> <database> ...") of the databases `ours` accepts, sampled. */
export function postgresSampler(ours: (database: string) => boolean, everyMs = 100) {
  const last = new Map<number, number>();
  const sample = () => {
    for (const p of allProcs()) {
      const m = /^postgres: [^:]+: \S+ (\S+) /.exec(p.cmdline);
      if (m && ours(m[1]!)) last.set(p.pid, p.own);
    }
  };
  sample();
  const timer = setInterval(sample, everyMs);
  timer.unref();
  return {
    /** CPU seconds of the bench's backends so far. */
    seconds() {
      sample();
      let ticks = 0;
      for (const t of last.values()) ticks += t;
      return ticks / TICKS_PER_SECOND;
    },
    stop: () => clearInterval(timer),
  };
}

/** This process's CPU seconds (the service, its workers, the bench's HTTP clients and SMTP server: an upper bound for svc). */
export const ownCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
