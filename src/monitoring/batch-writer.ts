// Streamed samples of many servers written together: one write (a Lua call and one SQL statement)
// costs about as much for 200 samples as for one. A sample waits at most `waitMs` (far below any
// interval) for others to share its write; a write takes at most `max`, and one that fills goes at
// once. Writes run side by side; close() writes what waits and waits for every write.

export interface BatchWriterOptions<T> {
  write(items: T[]): Promise<void>;
  /** `write` rejected (the items are not written again). */
  failed(err: unknown, items: T[]): void;
  max?: number;
  waitMs?: number;
}

export interface BatchWriter<T> {
  add(item: T): void;
  /** Writes what waits now, then waits for every write under way. */
  close(): Promise<void>;
  /** Forgets what waits, unwritten (the runner stops where it stands). */
  drop(): void;
}

export function createBatchWriter<T>({ write, failed, max = 200, waitMs = 200 }: BatchWriterOptions<T>): BatchWriter<T> {
  let waiting: T[] = [];
  let timer: NodeJS.Timeout | null = null;
  const writing = new Set<Promise<void>>();

  function flush() {
    if (timer) clearTimeout(timer);
    timer = null;
    const items = waiting;
    waiting = [];
    if (items.length === 0) return;
    const done = write(items)
      .catch((err) => failed(err, items))
      .finally(() => writing.delete(done));
    writing.add(done);
  }

  return {
    add(item) {
      waiting.push(item);
      if (waiting.length >= max) flush();
      else timer ??= setTimeout(flush, waitMs);
    },
    async close() {
      flush();
      await Promise.all(writing);
    },
    drop() {
      if (timer) clearTimeout(timer);
      timer = null;
      waiting = [];
    },
  };
}
