// CPU seconds (user + system) from /proc, for benches that say where a call's CPU goes.
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function ticksOf(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** CPU seconds a process has used so far. */
export function processCpu(pid: number): number {
  return ticksOf(readFileSync(`/proc/${pid}/stat`, 'utf8')) / TICKS_PER_SECOND;
}

/**
 * CPU seconds used so far by the processes named `postgres` on this machine (the server and its
 * backends; a backend that exited between two readings takes its seconds with it). Meaningful
 * only when the bench's PostgreSQL runs here; null without /proc.
 */
export function postgresCpu(): number | null {
  let ticks = 0;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        if (stat.includes('(postgres)')) ticks += ticksOf(stat);
      } catch {
        // ended meanwhile
      }
    }
  } catch {
    return null;
  }
  return ticks / TICKS_PER_SECOND;
}
