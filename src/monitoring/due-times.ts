// The due times of the servers a monitor runner holds. A server is due at every t ≡ phase (mod
// every), on the same grid for every worker, and one timer per server runs its next due time. A due
// time that comes while the server's previous one still runs is skipped: the next is on the grid.
// A server just added runs the due time that passed while it was being taken (its connection
// opening) when that one is recent, less than 70 % of an interval ago; if the previous holder
// recorded it, the claim (monitor-leases.ts) skips it.
import type { MonitorSchedule } from './monitor-service.js';

/** How recent (a share of the interval) the due time just passed must be for a server just added to still run it. */
const CATCH_UP = 0.7;

/** The first due time after `now` of a schedule. */
export function nextDue({ every, phase }: MonitorSchedule, now: number): number {
  return Math.floor((now - phase) / every) * every + phase + every;
}

export interface DueTimesOptions {
  /** Handles one due time of a server; the server's next due time does not run before it settles. */
  run(id: number, due: number, every: number): Promise<void>;
  /** `run` rejected. */
  failed(err: unknown, id: number): void;
}

export interface DueTimes {
  /** Starts the server's timer, and runs the due time just passed when it is recent. A server already added is only rescheduled. */
  add(id: number, schedule: MonitorSchedule): void;
  /** The server's schedule changed: its timer is set on the new grid. */
  reschedule(id: number, schedule: MonitorSchedule): void;
  /** Stops the server's timer (a due time already running goes on). */
  remove(id: number): void;
  has(id: number): boolean;
  /** Stops every timer. */
  clear(): void;
  /** Resolves once no due time runs any more, or after `timeoutMs`. */
  settled(timeoutMs: number): Promise<void>;
}

interface Entry {
  schedule: MonitorSchedule;
  timer: NodeJS.Timeout | null;
  running: boolean;
}

export function createDueTimes({ run, failed }: DueTimesOptions): DueTimes {
  const entries = new Map<number, Entry>();
  const running = new Set<Promise<void>>();

  function arm(id: number, entry: Entry) {
    if (entry.timer) clearTimeout(entry.timer);
    const due = nextDue(entry.schedule, Date.now());
    entry.timer = setTimeout(() => start(id, entry, due), due - Date.now());
  }

  function start(id: number, entry: Entry, due: number) {
    if (entries.get(id) !== entry) return;
    arm(id, entry);
    if (entry.running) return;
    entry.running = true;
    const done = run(id, due, entry.schedule.every)
      .catch((err) => failed(err, id))
      .finally(() => {
        entry.running = false;
        running.delete(done);
      });
    running.add(done);
  }

  function reschedule(id: number, schedule: MonitorSchedule) {
    const entry = entries.get(id);
    if (!entry || (entry.schedule.every === schedule.every && entry.schedule.phase === schedule.phase)) return;
    entry.schedule = schedule;
    arm(id, entry);
  }

  function remove(id: number) {
    const entry = entries.get(id);
    if (entry?.timer) clearTimeout(entry.timer);
    entries.delete(id);
  }

  return {
    add(id, schedule) {
      if (entries.has(id)) return reschedule(id, schedule);
      const entry: Entry = { schedule, timer: null, running: false };
      entries.set(id, entry);
      arm(id, entry);
      const last = nextDue(schedule, Date.now()) - schedule.every;
      if (Date.now() - last < schedule.every * CATCH_UP) start(id, entry, last);
    },
    reschedule,
    remove,
    has: (id) => entries.has(id),
    clear() {
      for (const id of [...entries.keys()]) remove(id);
    },
    async settled(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([Promise.all(running), timeout]);
      clearTimeout(timer);
    },
  };
}
