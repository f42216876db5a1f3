// The monitor runner's due times (src/monitoring/due-times.ts) on a hand-driven clock (Vitest's
// fake timers and Date): each server's due times on its grid, none while the previous one runs,
// the due time that passed while a server was being taken, rescheduling and removal. Needs no service.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createDueTimes, nextDue } from '../../src/monitoring/due-times.js';

const EVERY = 5000;

/** Due times the test ends by hand; `runs` lists "<id>@<due>" as they start. */
function harness() {
  const runs: string[] = [];
  const enders = new Map<string, (err?: Error) => void>();
  const failures: [unknown, number][] = [];
  const dueTimes = createDueTimes({
    run: (id, due) => {
      runs.push(`${id}@${due}`);
      return new Promise<void>((resolve, reject) => enders.set(`${id}@${due}`, (err) => (err ? reject(err) : resolve())));
    },
    failed: (err, id) => failures.push([err, id]),
  });
  return {
    dueTimes,
    runs,
    failures,
    async end(run: string, err?: Error) {
      enders.get(run)!(err);
      await vi.advanceTimersByTimeAsync(0);
    },
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('nextDue', () => {
  it('is the first time after now on the grid phase + k × every', () => {
    expect(nextDue({ every: EVERY, phase: 1200 }, 11_200)).toBe(16_200);
    expect(nextDue({ every: EVERY, phase: 1200 }, 11_199)).toBe(11_200);
  });
});

describe('createDueTimes', () => {
  it("runs a server's due times on its grid, and skips one that comes while the previous still runs", async () => {
    vi.setSystemTime(14_000); // the last due time (10 000) passed 80 % of an interval ago: not run
    const h = harness();
    h.dueTimes.add(1, { every: EVERY, phase: 0 });
    await vi.advanceTimersByTimeAsync(999);
    expect(h.runs).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.runs).toEqual(['1@15000']);
    await vi.advanceTimersByTimeAsync(EVERY); // 20 000 comes while 15 000 runs
    expect(h.runs).toEqual(['1@15000']);
    await h.end('1@15000');
    await vi.advanceTimersByTimeAsync(EVERY);
    expect(h.runs).toEqual(['1@15000', '1@25000']);
  });

  it('a server just added runs the due time just passed when it is under 70 % of an interval old', async () => {
    vi.setSystemTime(13_400); // 10 000 passed 68 % of an interval ago
    const h = harness();
    h.dueTimes.add(1, { every: EVERY, phase: 0 });
    expect(h.runs).toEqual(['1@10000']);
    vi.setSystemTime(13_600); // 10 000 + 72 %
    h.dueTimes.add(2, { every: EVERY, phase: 0 });
    expect(h.runs).toEqual(['1@10000']);
    // Added again (already there): rescheduled at most, nothing run at once.
    h.dueTimes.add(1, { every: EVERY, phase: 0 });
    expect(h.runs).toEqual(['1@10000']);
  });

  it('moves a rescheduled server to its new grid; a removed one runs no more; a failure is reported', async () => {
    vi.setSystemTime(4_000);
    const h = harness();
    h.dueTimes.add(1, { every: EVERY, phase: 0 });
    h.dueTimes.add(2, { every: EVERY, phase: 0 });
    h.dueTimes.reschedule(1, { every: 10_000, phase: 2000 });
    h.dueTimes.remove(2);
    expect(h.dueTimes.has(2)).toBe(false);
    await vi.advanceTimersByTimeAsync(20_000);
    expect(h.runs).toEqual(['1@12000']);
    const failure = new Error('the poll failed');
    await h.end('1@12000', failure);
    expect(h.failures).toEqual([[failure, 1]]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.runs).toEqual(['1@12000', '1@32000']);
    h.dueTimes.clear();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(h.runs).toHaveLength(2);
  });

  it('settled() waits for the due times that run, at most its timeout', async () => {
    vi.setSystemTime(4_000);
    const h = harness();
    h.dueTimes.add(1, { every: EVERY, phase: 0 });
    await vi.advanceTimersByTimeAsync(1000);
    h.dueTimes.clear();
    let settled = false;
    void h.dueTimes.settled(3000).then(() => {
      settled = true;
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(settled).toBe(false);
    await h.end('1@5000');
    expect(settled).toBe(true);

    h.dueTimes.add(2, { every: EVERY, phase: 0 }); // 5000 just passed: it runs at once, and never ends
    expect(h.runs).toEqual(['1@5000', '2@5000']);
    let gaveUp = false;
    void h.dueTimes.settled(3000).then(() => {
      gaveUp = true;
    });
    await vi.advanceTimersByTimeAsync(2999);
    expect(gaveUp).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(gaveUp).toBe(true);
  });
});
