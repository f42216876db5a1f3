// The monitor runner's batch writer (src/monitoring/batch-writer.ts) on a hand-driven clock: how
// long a sample waits for others, how many share a write, closing and dropping, and a failed write.
// Needs no service.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBatchWriter } from '../../src/monitoring/batch-writer.js';

/** Writes the test ends by hand. */
function harness(opts: { max?: number; waitMs?: number } = {}) {
  const writes: number[][] = [];
  const enders: ((err?: Error) => void)[] = [];
  const failures: [unknown, number[]][] = [];
  const writer = createBatchWriter<number>({
    ...opts,
    write: (items) => {
      writes.push(items);
      return new Promise<void>((resolve, reject) => enders.push((err) => (err ? reject(err) : resolve())));
    },
    failed: (err, items) => failures.push([err, items]),
  });
  return { writer, writes, failures, end: (i: number, err?: Error) => enders[i]!(err) };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('createBatchWriter', () => {
  it('a sample waits at most waitMs for others to share its write', async () => {
    const h = harness({ waitMs: 200 });
    h.writer.add(1);
    await vi.advanceTimersByTimeAsync(150);
    h.writer.add(2);
    expect(h.writes).toEqual([]);
    await vi.advanceTimersByTimeAsync(50); // 200 ms after the first
    expect(h.writes).toEqual([[1, 2]]);
    h.writer.add(3);
    await vi.advanceTimersByTimeAsync(200);
    expect(h.writes).toEqual([[1, 2], [3]]);
  });

  it('a write takes at most `max`: one that fills goes at once, the rest waits', async () => {
    const h = harness({ max: 3, waitMs: 200 });
    for (const n of [1, 2, 3, 4]) h.writer.add(n);
    expect(h.writes).toEqual([[1, 2, 3]]);
    await vi.advanceTimersByTimeAsync(200);
    expect(h.writes).toEqual([[1, 2, 3], [4]]);
  });

  it('close() writes what waits and waits for every write; a failed write is reported, not thrown; drop() forgets', async () => {
    const h = harness({ waitMs: 200 });
    h.writer.add(1);
    await vi.advanceTimersByTimeAsync(200);
    h.writer.add(2);
    let closed = false;
    const closing = h.writer.close().then(() => {
      closed = true;
    });
    expect(h.writes).toEqual([[1], [2]]);
    h.end(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(closed).toBe(false); // [1] is still being written
    const failure = new Error('PostgreSQL is down');
    h.end(0, failure);
    await closing;
    expect(h.failures).toEqual([[failure, [1]]]);

    h.writer.add(3);
    h.writer.drop();
    await vi.advanceTimersByTimeAsync(1000);
    await h.writer.close();
    expect(h.writes).toEqual([[1], [2]]);
  });
});
