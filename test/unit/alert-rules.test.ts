// The sustained-window rule of alert evaluation (a rule fires once its condition held for its duration) and the wording of notices, on plain
// data: a spike does not hold for a duration, a break restarts it, and resolve notices say how
// long the alert lasted.
import { describe, expect, it } from 'vitest';
import { sustainedMs } from '../../src/alerts/alert-durations.js';
import { fireNotice, formatDuration, resolveNotice } from '../../src/alerts/alert-text.js';

const T = Date.UTC(2026, 0, 1, 12, 0, 0);
/** Samples every 5 s, newest first; `cpu` lists the values oldest first. */
const samples = (cpu: number[]) =>
  cpu.map((v, i) => ({ created_at: new Date(T + i * 5000), cpu_percent: v, ram_percent: 0, disk_percent: 0, load_1: 0 })).reverse();

describe('sustainedMs', () => {
  it('a single spike holds for 0 ms: it never fires a 5-minute rule', () => {
    expect(sustainedMs(samples([10, 10, 10, 99]), 'cpu_percent', 90)).toBe(0);
  });
  it('the newest sample below the threshold: not holding at all', () => {
    expect(sustainedMs(samples([99, 99, 99, 10]), 'cpu_percent', 90)).toBe(-1);
    expect(sustainedMs([], 'cpu_percent', 90)).toBe(-1);
  });
  it('counts from the first sample of the unbroken run, so a dip restarts the duration (flapping is bounded)', () => {
    expect(sustainedMs(samples([99, 99, 99, 99, 99, 99, 99]), 'cpu_percent', 90)).toBe(30_000);
    expect(sustainedMs(samples([99, 99, 99, 50, 99, 99, 99]), 'cpu_percent', 90)).toBe(10_000);
    expect(sustainedMs(samples([90, 90]), 'cpu_percent', 90)).toBe(5_000); // value >= threshold
  });
});

describe('notices', () => {
  const facts = {
    metric: 'disk_percent' as const,
    threshold: 90,
    value: 93.456,
    resolved_value: 71.2,
    started_at: new Date(T),
    resolved_at: new Date(T + 7 * 60_000 + 5_000),
    duration_seconds: 300,
    rule_name: 'disk full',
  };
  it('name the server, the metric, the value and the threshold; resolve says how long it lasted', () => {
    expect(fireNotice('web-1', facts).title).toBe('[ALERT] web-1: disk_percent 93.46 % >= 90 % for 5 min');
    expect(resolveNotice('10.0.0.5', facts).title).toBe('[RESOLVED] 10.0.0.5: disk_percent 71.2 % (threshold 90 %), lasted 7 min 5 s');
    expect(fireNotice('web-1', { ...facts, metric: 'server_offline', threshold: null, value: 3, duration_seconds: 0 }).title).toBe(
      '[ALERT] web-1: server_offline (3 failed polls in a row)',
    );
  });
  it('formatDuration', () => {
    expect([0, 12_000, 61_000, 3_600_000 + 5 * 60_000 + 9_000, 2 * 86_400_000 + 3_600_000].map(formatDuration)).toEqual([
      '0 s',
      '12 s',
      '1 min 1 s',
      '1 h 5 min',
      '2 d 1 h',
    ]);
  });
});
