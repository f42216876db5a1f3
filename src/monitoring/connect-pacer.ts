// How many SSH connections a monitor runner opens at once. A handshake costs the server's side
// most (a loaded server, or the bench's simulated fleet on the same machine): more at once only
// makes each slower, until every one outlasts its timeout. So the number adapts: it starts at
// `start`, grows by one for each connection that took under `targetMs`, shrinks by one for each
// over twice that (between `min` and `max`). Only work that reports a connection counts: not a
// failure (a dead server says nothing about the others), not work that found nothing to do.
// Urgent work (a server to poll now) goes before the rest (standbys), and waiting work can be
// made urgent.

export interface ConnectPacerOptions {
  start: number;
  min: number;
  max: number;
  targetMs: number;
  /** Tests: the clock. */
  now?: () => number;
}

/** One piece of work: the caller sets `connected` when it opened a connection (then it counts). */
export interface PacerTicket {
  urgent: boolean;
  connected?: boolean;
}

export interface ConnectPacer {
  run<T>(ticket: PacerTicket, fn: () => Promise<T>): Promise<T>;
  /** Makes a ticket urgent; if it is waiting, it goes before the rest. */
  hurry(ticket: PacerTicket): void;
  /** How many may run at once now. */
  readonly window: number;
  /** How many run now. */
  readonly running: number;
}

export function createConnectPacer({ start, min, max, targetMs, now = Date.now }: ConnectPacerOptions): ConnectPacer {
  const lowest = Math.min(min, max);
  let window = Math.max(Math.min(start, max), lowest);
  let running = 0;
  const waiting = { urgent: [] as Waiter[], later: [] as Waiter[] };
  type Waiter = { ticket: PacerTicket; wake: () => void };

  function wake() {
    while (running < window) {
      const next = waiting.urgent.shift() ?? waiting.later.shift();
      if (!next) return;
      running++; // counted for the waiter it wakes
      next.wake();
    }
  }

  return {
    get window() {
      return window;
    },
    get running() {
      return running;
    },
    hurry(ticket) {
      ticket.urgent = true;
      const i = waiting.later.findIndex((w) => w.ticket === ticket);
      if (i >= 0) waiting.urgent.push(...waiting.later.splice(i, 1));
    },
    async run(ticket, fn) {
      if (running >= window) await new Promise<void>((wake) => (ticket.urgent ? waiting.urgent : waiting.later).push({ ticket, wake }));
      else running++;
      const started = now();
      try {
        const result = await fn();
        const took = now() - started;
        if (ticket.connected && took < targetMs) window = Math.min(max, window + 1);
        else if (ticket.connected && took > 2 * targetMs) window = Math.max(lowest, window - 1);
        return result;
      } finally {
        running--;
        wake();
      }
    },
  };
}
