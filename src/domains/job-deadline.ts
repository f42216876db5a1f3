// A domain job's own time limit. BullMQ has no per-job timeout: without one, a host that stops
// answering in the middle of a change (each SSH command may take minutes) would hold a worker slot
// of the domains queue for as long as it likes. At the deadline the work's signal is aborted (its
// SSH session is closed, it writes nothing more about the domain), `expired` records the outcome,
// and the job fails with the reason.
import { UserError } from '../core/errors.js';

export async function withDeadline<T>(
  ms: number,
  what: string,
  work: (signal: AbortSignal) => Promise<T>,
  expired: (reason: string) => Promise<void> = async () => {},
): Promise<T> {
  const controller = new AbortController();
  const running = work(controller.signal);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const reason = new UserError(`${what} did not finish within ${+(ms / 1000).toFixed(1)} s`);
      controller.abort(reason);
      expired(reason.message).then(
        () => reject(reason),
        (err: Error) => reject(new UserError(`${reason.message} (recording it failed: ${err.message})`)),
      );
    }, ms);
  });
  // Once the deadline has passed, what the abandoned work throws (its session closed) is no news.
  const settled = running.then(
    (value) => (controller.signal.aborted ? deadline : value),
    (err: unknown) => (controller.signal.aborted ? deadline : Promise.reject(err)),
  );
  try {
    return await Promise.race([settled, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
