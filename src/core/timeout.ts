// One bound for a promise that may never settle (a DNS query, a metrics source, a probe).

/**
 * Resolves or rejects as `promise` does, or rejects after `ms` with what `timedOut` returns (it may
 * also cancel the work, e.g. a DNS resolver's queries). The work itself is not stopped otherwise.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The usual timeout error: "<what> did not answer within <ms> ms". */
export function noAnswer(what: string, ms: number): () => Error {
  return () => new Error(`${what} did not answer within ${ms} ms`);
}
