// How many SSH connections a monitor runner opens at once. A handshake costs the server's side
// most (a loaded server, or the bench's simulated fleet on the same machine): more at once only
// makes each slower, until every one outlasts its timeout. So the number adapts: it starts at
// `start`, grows by one for each connection that took under `targetMs`, shrinks by one for each
// over twice that (between `min` and `max`); failures do not count (a dead server says nothing
// about the others). Urgent work (a server to poll now) goes before the rest (standbys).

export interface ConnectPacerOptions {
  start: number;
  min: number;
  max: number;
  targetMs: number;
  /** Tests: the clock. */
  now?: () => number;
}

export interface ConnectPacer {
  run<T>(urgent: boolean, fn: () => Promise<T>): Promise<T>;
  /** How many may run at once now. */
  readonly window: number;
  /** How many run now. */
  readonly running: number;
}

export function createConnectPacer({ start, min, max, targetMs, now = Date.now }: ConnectPacerOptions): ConnectPacer {
  let window = Math.max(Math.min(start, max), Math.min(min, max));
  let running = 0;
  const waiting = { urgent: [] as (() => void)[], later: [] as (() => void)[] };

  function wake() {
    while (running < window) {
      const next = waiting.urgent.shift() ?? waiting.later.shift();
      if (!next) return;
      running++; // counted for the waiter it wakes
      next();
    }
  }

  return {
    get window() {
      return window;
    },
    get running() {
      return running;
    },
    async run(urgent, fn) {
      if (running >= window) await new Promise<void>((r) => (urgent ? waiting.urgent : waiting.later).push(r));
      else running++;
      const started = now();
      try {
        const result = await fn();
        const took = now() - started;
        if (took < targetMs) window = Math.min(max, window + 1);
        else if (took > 2 * targetMs) window = Math.max(min, window - 1);
        return result;
      } finally {
        running--;
        wake();
      }
    },
  };
}
