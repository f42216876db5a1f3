// Group commit: concurrent submissions are gathered and handed to `write` in batches, and each
// submission settles only when the batch holding it has settled (for a database write: after
// its transaction committed). A batch starts at once while fewer than `maxInFlight` batches are
// running (a lone caller waits for nothing: its batch starts on the next turn of the event loop);
// otherwise submissions gather until a running batch ends, a batch is full (`maxRows`, or
// `maxSize` by `sizeOf`), or the oldest has waited `windowMs`. A batch that fails fails its own
// submissions only; the next one starts as usual.

export interface GroupCommitOptions<I, O> {
  /** Writes one batch; one result per item, in order. Throwing fails every item of the batch. */
  write: (items: I[]) => Promise<O[]>;
  /** The longest a submission waits for its batch to start while `maxInFlight` batches run. */
  windowMs: number;
  /** Rows per batch at most; a full batch starts without waiting. */
  maxRows: number;
  /** Optionally also a total size per batch (e.g. bytes): a batch is full at `maxSize` (one item always fits). */
  sizeOf?: (item: I) => number;
  maxSize?: number;
  /** Batches written at the same time before submissions start to gather. */
  maxInFlight: number;
}

interface Waiting<I, O> {
  item: I;
  size: number;
  resolve: (value: O) => void;
  reject: (err: unknown) => void;
}

export function createGroupCommit<I, O>(opts: GroupCommitOptions<I, O>) {
  const waiting: Waiting<I, O>[] = [];
  let inFlight = 0;
  let tickScheduled = false;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  const running = new Set<Promise<void>>();
  const maxSize = opts.maxSize ?? Number.POSITIVE_INFINITY;
  let waitingSize = 0;

  const full = () => waiting.length >= opts.maxRows || waitingSize >= maxSize;

  /** Takes the next batch off the queue: up to maxRows items and maxSize in total. */
  function next(): Waiting<I, O>[] {
    let count = 0;
    let size = 0;
    while (count < waiting.length && count < opts.maxRows && (count === 0 || size + waiting[count]!.size <= maxSize)) {
      size += waiting[count]!.size;
      count += 1;
    }
    waitingSize -= size;
    return waiting.splice(0, count);
  }

  function start(batch: Waiting<I, O>[]) {
    inFlight += 1;
    const done: Promise<void> = Promise.resolve()
      .then(() => opts.write(batch.map((w) => w.item)))
      .then((results) => {
        if (results.length !== batch.length) throw new Error(`group commit: ${results.length} results for ${batch.length} items`);
        for (const [i, w] of batch.entries()) w.resolve(results[i]!);
      })
      .catch((err: unknown) => {
        for (const w of batch) w.reject(err);
      })
      .finally(() => {
        inFlight -= 1;
        running.delete(done);
        pump(false);
      });
    running.add(done);
  }

  /** Starts the batches that may start; arms the window timer for what still waits. */
  function pump(windowOver: boolean) {
    while (waiting.length > 0 && (windowOver || inFlight < opts.maxInFlight || full())) start(next());
    if (waiting.length === 0 && timer) {
      clearTimeout(timer);
      timer = null;
    } else if (waiting.length > 0 && !timer) {
      timer = setTimeout(() => {
        timer = null;
        pump(true);
      }, opts.windowMs);
    }
  }

  return {
    /** Settles with the item's result once its batch has been written (rejects if the batch failed). */
    submit(item: I): Promise<O> {
      if (closed) return Promise.reject(new Error('group commit closed'));
      return new Promise<O>((resolve, reject) => {
        const size = opts.sizeOf?.(item) ?? 0;
        waiting.push({ item, size, resolve, reject });
        waitingSize += size;
        if (full()) return pump(false);
        if (tickScheduled) return;
        // Every call that reaches this point in the same turn of the event loop joins the batch.
        tickScheduled = true;
        setImmediate(() => {
          tickScheduled = false;
          pump(false);
        });
      });
    },

    /** Writes what waits, then resolves when every batch has settled; later submissions are refused. */
    async close() {
      closed = true;
      pump(true);
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}
