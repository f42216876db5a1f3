// The group-commit batcher on its own (src/webhooks/group-commit.ts), with a recording `write`
// whose batches end when the test says so: which submissions share a batch, that each settles
// only with its batch, that a failed batch fails its own submissions only, and close().
import { describe, expect, it } from 'vitest';
import { createGroupCommit } from '../../src/webhooks/group-commit.js';

/** A write that records each batch and settles it when the test calls end(i) or fail(i). */
function recordingWrite() {
  const batches: { items: number[]; end: () => void; fail: (err: Error) => void }[] = [];
  const write = (items: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      batches.push({ items, end: () => resolve(items.map((i) => `ok ${i}`)), fail: reject });
    });
  return { batches, write };
}

const turn = () => new Promise((r) => setImmediate(r));

/** The state of each promise: 'pending', or its value, or 'failed: <message>'. */
function track<T>(promises: Promise<T>[]) {
  const state: (string | T)[] = promises.map(() => 'pending');
  promises.forEach((p, i) => {
    p.then(
      (v) => {
        state[i] = v;
      },
      (err: Error) => {
        state[i] = `failed: ${err.message}`;
      },
    );
  });
  return state;
}

describe('group commit', () => {
  it('a lone submission is written on the next turn, alone; submissions of one turn share a batch', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 100, maxInFlight: 2 });
    const lone = track([gc.submit(1)]);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1]]);
    const together = track([gc.submit(2), gc.submit(3), gc.submit(4)]);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2, 3, 4]]);
    batches[1]!.end();
    await turn();
    expect(together).toEqual(['ok 2', 'ok 3', 'ok 4']);
    expect(lone).toEqual(['pending']); // settles with its own batch only
    batches[0]!.end();
    await turn();
    expect(lone).toEqual(['ok 1']);
  });

  it('while maxInFlight batches run, submissions gather and start as one batch when a batch ends', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 100, maxInFlight: 1 });
    const first = track([gc.submit(1)]);
    await turn();
    const gathered = track([5, 6, 7].map((i) => gc.submit(i)));
    await turn();
    gc.submit(8);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1]]);
    batches[0]!.end();
    await turn();
    expect(first).toEqual(['ok 1']);
    expect(batches.map((b) => b.items)).toEqual([[1], [5, 6, 7, 8]]);
    expect(gathered).toEqual(['pending', 'pending', 'pending']);
  });

  it('maxRows: a full batch starts without waiting, in submission order', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 3, maxInFlight: 1 });
    gc.submit(0);
    await turn();
    for (let i = 1; i <= 7; i++) gc.submit(i);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[0], [1, 2, 3], [4, 5, 6]]);
    for (const b of batches.slice(0, 2)) b.end();
    await turn();
    expect(batches).toHaveLength(3); // 7 waits: a full batch is still running
    batches[2]!.end();
    await turn();
    expect(batches.map((b) => b.items).at(-1)).toEqual([7]);
  });

  it('maxSize: a batch holds at most maxSize by sizeOf (an oversized item goes alone)', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 100, maxInFlight: 1, sizeOf: (i: number) => i, maxSize: 10 });
    gc.submit(0);
    await turn();
    for (const i of [4, 5, 2, 30, 3]) gc.submit(i);
    await turn();
    // Full waiting rows start without waiting for the running batch: 4 + 5 (+ 2 would be 11), then 2
    // (+ 30 would be 32), then 30 alone; 3 waits.
    expect(batches.map((b) => b.items)).toEqual([[0], [4, 5], [2], [30]]);
    for (const b of batches) b.end();
    await turn();
    expect(batches.map((b) => b.items).slice(4)).toEqual([[3]]);
  });

  it('a failed batch fails its own submissions only; the next batch works', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 100, maxInFlight: 2 });
    const a = track([gc.submit(1), gc.submit(2)]);
    await turn();
    const b = track([gc.submit(3)]);
    await turn();
    batches[0]!.fail(new Error('connection lost'));
    batches[1]!.end();
    await turn();
    expect(a).toEqual(['failed: connection lost', 'failed: connection lost']);
    expect(b).toEqual(['ok 3']);
    const c = track([gc.submit(4)]);
    await turn();
    batches[2]!.end();
    await turn();
    expect(c).toEqual(['ok 4']);
  });

  it('a write answering the wrong number of results fails its batch', async () => {
    const gc = createGroupCommit<number, number>({ write: async () => [1], windowMs: 1, maxRows: 10, maxInFlight: 1 });
    const both = track([gc.submit(1), gc.submit(2)]);
    await gc.close();
    expect(both).toEqual(['failed: group commit: 1 results for 2 items', 'failed: group commit: 1 results for 2 items']);
  });

  it('close() writes what waits, waits for every batch, then refuses submissions', async () => {
    const { batches, write } = recordingWrite();
    const gc = createGroupCommit({ write, windowMs: 60_000, maxRows: 100, maxInFlight: 1 });
    const first = track([gc.submit(1)]);
    await turn();
    const waiting = track([gc.submit(2)]);
    let closed = false;
    const closing = gc.close().then(() => {
      closed = true;
    });
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1], [2]]); // started despite maxInFlight
    batches[1]!.end();
    await turn();
    expect(closed).toBe(false);
    batches[0]!.end();
    await closing;
    expect([first, waiting]).toEqual([['ok 1'], ['ok 2']]);
    await expect(gc.submit(3)).rejects.toThrow(/closed/);
  });
});
