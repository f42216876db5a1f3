// What a running command has printed so far, for the job's progress: the last 4 KB
// of its output, published at most once a second while it changes, secrets masked.
const MAX_SECRET_BYTES = 1024;

export interface OutputProgress {
  output_tail: string;
  output_bytes: number;
  updated_at: string;
}

type Publish = (progress: OutputProgress) => Promise<unknown>;
type Mask = (text: string) => string;

/**
 * Runs `fn` with a tail fed by its `add`; the tail's timer stops when `fn` ends, however it ends
 * (a command that fails before it runs must not leave a timer behind).
 */
export async function withOutputTail<T>(publish: Publish, mask: Mask, fn: (add: (chunk: Buffer) => void) => Promise<T>, opts = {}) {
  const tail = outputTail(publish, mask, opts);
  try {
    return await fn(tail.add);
  } finally {
    await tail.end();
  }
}

function outputTail(publish: Publish, mask: Mask, { maxBytes = 4096, everyMs = 1000 } = {}) {
  // A window longer than the tail by the longest secret we mask, so that a secret cut at the edge
  // of the tail is still whole in what is masked.
  let window = Buffer.alloc(0);
  let total = 0;
  let changed = false;

  async function flush() {
    if (!changed) return;
    changed = false;
    const masked = mask(window.toString('utf8'));
    // A view of the output while it runs: a missed update shows an older tail until the next one,
    // and the job's result carries the whole output.
    await publish({ output_tail: masked.slice(-maxBytes), output_bytes: total, updated_at: new Date().toISOString() }).catch(() => {});
  }
  const timer = setInterval(() => void flush(), everyMs);
  timer.unref();

  return {
    add(chunk: Buffer) {
      total += chunk.length;
      window = Buffer.concat([window, chunk]);
      if (window.length > maxBytes + MAX_SECRET_BYTES) window = window.subarray(window.length - maxBytes - MAX_SECRET_BYTES);
      changed = true;
    },
    /** Publishes what came last and stops. */
    async end() {
      clearInterval(timer);
      await flush();
    },
  };
}
