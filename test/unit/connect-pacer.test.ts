// The monitor runner's connect pacing (src/monitoring/connect-pacer.ts) with a hand-driven clock
// and connections that end when the test says: how many run at once, how that adapts to how long
// they take, and that takes go before standbys. Needs no service.
import { describe, expect, it } from 'vitest';
import { createConnectPacer, type PacerTicket } from '../../src/monitoring/connect-pacer.js';

/** Work items the test ends by hand, each "taking" the time the clock moved meanwhile. */
function harness(opts: { start: number; min: number; max: number }) {
  let clock = 0;
  const pacer = createConnectPacer({ ...opts, targetMs: 1000, now: () => clock });
  const started: string[] = [];
  const enders = new Map<string, (fail?: boolean) => void>();
  const tickets = new Map<string, PacerTicket>();
  const submit = (name: string, urgent = false, connected = true) => {
    const ticket: PacerTicket = { urgent, connected };
    tickets.set(name, ticket);
    return pacer
      .run(ticket, () => {
        started.push(name);
        return new Promise<string>((resolve, reject) => enders.set(name, (fail) => (fail ? reject(new Error(name)) : resolve(name))));
      })
      .catch(() => 'failed');
  };
  const flush = () => new Promise((r) => setTimeout(r, 0));
  return {
    pacer,
    tickets,
    started,
    submit,
    advance: (ms: number) => {
      clock += ms;
    },
    async end(name: string, fail = false) {
      enders.get(name)!(fail);
      await flush();
    },
    flush,
  };
}

describe('createConnectPacer', () => {
  it('runs at most `window` at once and starts the next as one ends', async () => {
    const h = harness({ start: 2, min: 1, max: 10 });
    for (const n of ['a', 'b', 'c', 'd']) void h.submit(n);
    await h.flush();
    expect(h.started).toEqual(['a', 'b']);
    expect(h.pacer.running).toBe(2);
    h.advance(5000); // slow: the window shrinks to 1
    await h.end('a');
    expect(h.pacer.window).toBe(1);
    expect(h.started).toEqual(['a', 'b']); // b still runs: nothing more may start
    await h.end('b');
    expect(h.started).toEqual(['a', 'b', 'c']);
    expect(h.pacer.running).toBe(1);
  });

  it('grows by one per fast connection up to max, shrinks per slow one down to min; failures and work without a handshake do not count', async () => {
    const h = harness({ start: 2, min: 2, max: 3 });
    void h.submit('a');
    await h.flush();
    await h.end('a'); // took 0 ms
    expect(h.pacer.window).toBe(3);
    void h.submit('b');
    await h.flush();
    await h.end('b');
    expect(h.pacer.window).toBe(3); // at max
    void h.submit('c');
    await h.flush();
    h.advance(1500); // between the target and twice it: unchanged
    await h.end('c');
    expect(h.pacer.window).toBe(3);
    void h.submit('d');
    await h.flush();
    h.advance(60_000);
    await h.end('d', true); // a timeout of a dead server
    expect(h.pacer.window).toBe(3);
    void h.submit('reused', false, false); // found its connection open: says nothing of handshakes
    await h.flush();
    h.advance(5000);
    await h.end('reused');
    expect(h.pacer.window).toBe(3);
    for (const n of ['e', 'f']) void h.submit(n);
    await h.flush();
    h.advance(3000);
    await h.end('e');
    await h.end('f');
    expect(h.pacer.window).toBe(2); // at min
  });

  it('wakes urgent work (takes) before the rest (standbys), each in its order', async () => {
    const h = harness({ start: 1, min: 1, max: 1 });
    void h.submit('running');
    void h.submit('standby-1');
    void h.submit('take-1', true);
    void h.submit('standby-2');
    void h.submit('take-2', true);
    await h.flush();
    for (const n of ['running', 'take-1', 'take-2', 'standby-1']) await h.end(n);
    expect(h.started).toEqual(['running', 'take-1', 'take-2', 'standby-1', 'standby-2']);
  });

  it('hurries a waiting ticket before the other waiting ones; a max below min is still the max', async () => {
    const h = harness({ start: 1, min: 4, max: 1 });
    void h.submit('running');
    void h.submit('standby-1');
    void h.submit('standby-2');
    await h.flush();
    h.pacer.hurry(h.tickets.get('standby-2')!);
    expect(h.tickets.get('standby-2')!.urgent).toBe(true);
    h.advance(5000);
    await h.end('running');
    expect(h.pacer.window).toBe(1);
    expect(h.started).toEqual(['running', 'standby-2']);
  });
});
