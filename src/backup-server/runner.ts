// The backup server's runner: takes pending restores, then pending backups, then a verify when one
// is due (verify.ts), up to BACKUP_CONCURRENCY at once, and prunes old backups when nothing runs;
// when told there is work (kick) and every few seconds anyway (work another process of the same
// record left, leases run out, a verify comes due). close() lets running work finish.
import type { Logger } from 'pino';
import type { BackupRuns } from './backup-runs.js';
import type { RestoreRuns } from './restore-runs.js';
import type { Verifies } from './verify.js';

const LOOK_EVERY_MS = 5_000;

export function startRunner(log: Logger, concurrency: number, backups: BackupRuns, restores: RestoreRuns, verifies: Verifies) {
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  let ticking: Promise<void> | null = null;
  let again = false;

  const launch = (work: Promise<void>) => {
    const p = work.finally(() => {
      inFlight.delete(p);
      kick(); // a slot is free
    });
    inFlight.add(p);
  };

  async function tick() {
    await backups.sweep();
    await restores.sweep();
    await verifies.sweep();
    while (!stopped && inFlight.size < concurrency) {
      const restore = await restores.claim();
      if (restore) {
        launch(restores.execute(restore));
        continue;
      }
      const backup = await backups.claim();
      if (backup) {
        launch(backups.execute(backup));
        continue;
      }
      const verify = await verifies.claim();
      if (!verify) break;
      launch(verifies.execute(verify).then(() => undefined));
    }
    // Nothing running: old backups are pruned now (restic's prune takes a repository to itself).
    if (!stopped && inFlight.size === 0) await backups.pruneDue();
  }

  function kick() {
    if (stopped) return;
    if (ticking) {
      again = true;
      return;
    }
    ticking = tick()
      .catch((err) => log.error({ err }, 'the backup runner could not look for work; it looks again shortly'))
      .finally(() => {
        ticking = null;
        if (again) {
          again = false;
          kick();
        }
      });
  }

  const timer = setInterval(kick, LOOK_EVERY_MS);
  kick();
  return {
    kick,
    async close() {
      stopped = true;
      clearInterval(timer);
      await ticking;
      await Promise.all(inFlight);
    },
  };
}
