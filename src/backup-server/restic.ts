// The backup server's restic engine: each repository operation as one restic command (Debian's
// restic, 0.14 or later), its JSON output read back. How restic is run (environment, secrets,
// SFTP through ssh, the time bound) is restic-process.ts.
import { PassThrough } from 'node:stream';
import {
  type ResticOptions,
  type ResticRepository,
  ResticError,
  invocation,
  redact,
  resticFailure,
  spawnRestic,
} from './restic-process.js';

export {
  type ResticErrorCode,
  type ResticOptions,
  type ResticProvider,
  type ResticRepository,
  ResticError,
} from './restic-process.js';

export interface ResticSnapshot {
  id: string;
  time: Date;
  tags: string[];
}

interface SnapshotJson {
  id: string;
  time: string;
  tags?: string[] | null;
}

const SNAPSHOT_ID = /^[0-9a-f]{8,64}$/;

function checkTags(tags: string[]): void {
  // restic splits a --tag value on commas: a tag with one would select something else.
  for (const t of tags) if (!t || t.includes(',')) throw new ResticError(`not a restic tag: ${JSON.stringify(t)}`);
}

function checkIds(ids: string[]): void {
  for (const id of ids) if (!SNAPSHOT_ID.test(id)) throw new ResticError(`not a restic snapshot id: ${JSON.stringify(id)}`);
}

/** restic's `--time` form, in UTC (the child runs with TZ=UTC). */
const resticTime = (d: Date) => d.toISOString().slice(0, 19).replace('T', ' ');

const toSnapshot = (s: SnapshotJson): ResticSnapshot => ({ id: s.id, time: new Date(s.time), tags: s.tags ?? [] });

interface BackupSummary {
  snapshot_id?: string;
  data_added: number;
  total_bytes_processed: number;
  total_files_processed: number;
  files_unmodified: number;
}

/** The first line of restic's output that is JSON of the wanted shape (forget --prune prints prune's text after it). */
function jsonLine<T>(stdout: string, opening: '[' | '{', what: string): T {
  for (const line of stdout.split('\n')) {
    if (!line.startsWith(opening)) continue;
    try {
      return JSON.parse(line) as T;
    } catch {
      /* a progress line */
    }
  }
  throw new ResticError(`${what}: restic's output holds no JSON answer`);
}

interface Ran {
  stdout: string;
  stderr: string;
  code: number | null;
  /** What restic's failure means, when it failed (code not 0). */
  failure: ResticError | null;
}

export function createRestic(opts: ResticOptions) {
  const lockWaitMs = opts.lockWaitMs ?? 15 * 60_000;

  async function runOnce(what: string, repo: ResticRepository, args: string[], cwd?: string, timeoutMs = opts.timeoutMs): Promise<Ran> {
    const inv = await invocation(opts, repo, args);
    try {
      const { child, exit } = spawnRestic({ ...opts, timeoutMs }, inv, cwd);
      let stdout = '';
      child.stdout!.setEncoding('utf8');
      child.stdout!.on('data', (chunk: string) => {
        stdout += chunk;
      });
      const { code, stderr, timedOut } = await exit;
      const failure = code === 0 ? null : resticFailure(what, repo, inv, stderr, timedOut);
      return { stdout, stderr: redact(stderr, inv.secrets), code, failure };
    } finally {
      await inv.cleanup();
    }
  }

  /** A restic killed earlier leaves its lock behind (0.14 does not ignore it): `unlock` removes only stale ones. */
  async function clearStaleLocks(repo: ResticRepository): Promise<void> {
    // Bounded on its own: after a timeout the repository may still not answer. A failed unlock is
    // not the run's failure: a lock still held makes the run's own command fail, and say so.
    await runOnce('unlock', repo, ['unlock'], undefined, Math.min(opts.timeoutMs ?? 120_000, 120_000)).catch(() => undefined);
  }

  /** One restic command to its end; waits while another process holds the repository (a backup beside a prune). */
  async function attempt(what: string, repo: ResticRepository, args: string[], cwd?: string): Promise<Ran> {
    const started = Date.now();
    for (let n = 0; ; n++) {
      const ran = await runOnce(what, repo, args, cwd);
      if (ran.failure?.code === 'timeout') await clearStaleLocks(repo);
      if (ran.failure?.code !== 'locked' || Date.now() - started > lockWaitMs) return ran;
      if (n === 0) await clearStaleLocks(repo);
      await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** n)));
    }
  }

  /** As attempt(), a failure thrown. */
  async function run(what: string, repo: ResticRepository, args: string[], cwd?: string): Promise<Ran> {
    const ran = await attempt(what, repo, args, cwd);
    if (ran.failure) throw ran.failure;
    return ran;
  }

  async function snapshotsOf(repo: ResticRepository, args: string[]): Promise<ResticSnapshot[]> {
    const { stdout } = await run('listing snapshots', repo, ['snapshots', '--json', ...args]);
    return jsonLine<SnapshotJson[] | null>(stdout, '[', 'listing snapshots')?.map(toSnapshot) ?? [];
  }

  async function forget(repo: ResticRepository, snapshotIds: string[], o: { prune?: boolean } = {}): Promise<void> {
    if (snapshotIds.length === 0) return;
    checkIds(snapshotIds);
    await run('forgetting snapshots', repo, ['forget', ...(o.prune ? ['--prune'] : []), '--', ...snapshotIds]);
  }

  return {
    /** Makes the repository, or opens the one there with the password (a wrong one is a ResticError saying so). */
    async init(repo: ResticRepository): Promise<void> {
      const made = await runOnce('creating', repo, ['init']);
      if (!made.failure) return;
      if (!/config file already exists|already initialized/.test(made.stderr)) throw made.failure;
      // There already: it must open with this password.
      await run('opening', repo, ['cat', 'config']);
    },

    /**
     * A snapshot of the CONTENTS of `dir` (restic runs in it on '.'), so that its root is dir's
     * root. A snapshot restic made without some files (exit 3) is forgotten again and the backup
     * fails: a partial snapshot never stays as a backup.
     */
    async backup(
      repo: ResticRepository,
      dir: string,
      o: { tags: string[]; host: string; time?: Date },
    ): Promise<{ snapshotId: string; bytesAdded: number; bytesProcessed: number; files: number; filesUnmodified: number }> {
      checkTags(o.tags);
      if (!o.host || o.host.startsWith('-')) throw new ResticError(`not a host name for a snapshot: ${JSON.stringify(o.host)}`);
      // The work dir is made anew for each backup (new inodes and change times): a file is taken as
      // unchanged by its modification time and size, which tar keeps, as the parent snapshot has them
      // (Odoo never rewrites a stored file in place; the dump and the manifest are written anew).
      const args = [
        'backup',
        '--json',
        '--quiet',
        '--ignore-inode',
        '--ignore-ctime',
        `--host=${o.host}`,
        ...o.tags.map((t) => `--tag=${t}`),
      ];
      if (o.time) args.push(`--time=${resticTime(o.time)}`);
      const ran = await attempt(`backing up ${dir}`, repo, [...args, '--', '.'], dir);
      if (ran.failure && ran.code !== 3) throw ran.failure;
      const summary = jsonLine<BackupSummary>(
        ran.stdout
          .split('\n')
          .filter((l) => l.includes('"message_type":"summary"'))
          .join('\n'),
        '{',
        'backing up',
      );
      if (!summary.snapshot_id)
        throw new ResticError(`backing up ${dir} on the restic repository at ${repo.location}: restic named no snapshot`);
      // The summary names the snapshot by its short id: the full one is what callers keep.
      const [snapshot] = await snapshotsOf(repo, ['--', summary.snapshot_id]);
      if (!snapshot)
        throw new ResticError(`backing up ${dir}: snapshot ${summary.snapshot_id} is not in the repository at ${repo.location}`);
      if (ran.code === 3) {
        await forget(repo, [snapshot.id], { prune: true });
        throw new ResticError(
          `backing up ${dir}: restic could not read some files (the incomplete snapshot was removed): ${ran.stderr.trim()}`,
        );
      }
      return {
        snapshotId: snapshot.id,
        bytesAdded: summary.data_added,
        bytesProcessed: summary.total_bytes_processed,
        files: summary.total_files_processed,
        filesUnmodified: summary.files_unmodified ?? 0,
      };
    },

    /** Snapshots having every one of `tags`, oldest first. */
    async snapshots(repo: ResticRepository, o: { tags?: string[] } = {}): Promise<ResticSnapshot[]> {
      const tags = o.tags ?? [];
      checkTags(tags);
      return snapshotsOf(repo, tags.length > 0 ? [`--tag=${tags.join(',')}`] : []);
    },

    forget,

    /**
     * restic's keep-daily/weekly/monthly over the snapshots having every one of `tags`, as one
     * group (each backup has a tag of its own, so grouping by tags would keep them all), pruned.
     */
    async applyRetention(
      repo: ResticRepository,
      o: { tags: string[]; keepDaily: number; keepWeekly: number; keepMonthly: number },
    ): Promise<{ kept: string[]; removed: string[] }> {
      checkTags(o.tags);
      if (o.tags.length === 0) throw new ResticError('retention needs the tags of the snapshots it applies to');
      const keep = [o.keepDaily, o.keepWeekly, o.keepMonthly];
      if (keep.some((n) => !Number.isInteger(n) || n < 0) || keep.every((n) => n === 0)) {
        throw new ResticError(`retention keeps nothing: daily ${o.keepDaily}, weekly ${o.keepWeekly}, monthly ${o.keepMonthly}`);
      }
      const { stdout } = await run('applying retention', repo, [
        'forget',
        '--json',
        `--tag=${o.tags.join(',')}`,
        '--group-by=',
        `--keep-daily=${o.keepDaily}`,
        `--keep-weekly=${o.keepWeekly}`,
        `--keep-monthly=${o.keepMonthly}`,
        '--prune',
      ]);
      const groups = jsonLine<{ keep?: SnapshotJson[] | null; remove?: SnapshotJson[] | null }[] | null>(stdout, '[', 'applying retention');
      return {
        kept: (groups ?? []).flatMap((g) => (g.keep ?? []).map((s) => s.id)),
        removed: (groups ?? []).flatMap((g) => (g.remove ?? []).map((s) => s.id)),
      };
    },

    /** A file's bytes, or a folder as a zip or tar archive ('/' the whole snapshot). */
    dump(
      repo: ResticRepository,
      snapshotId: string,
      filePath: string,
      o: { archive?: 'zip' | 'tar' } = {},
    ): { stream: NodeJS.ReadableStream; done: Promise<void> } {
      const out = new PassThrough();
      const done = (async () => {
        checkIds([snapshotId]);
        if (!filePath.startsWith('/')) throw new ResticError(`a path in a snapshot starts with /: ${filePath}`);
        const args = ['dump', ...(o.archive ? [`--archive=${o.archive}`] : []), '--', snapshotId, filePath];
        const started = Date.now();
        for (let n = 0; ; n++) {
          const inv = await invocation(opts, repo, args);
          try {
            const { child, exit } = spawnRestic(opts, inv);
            let wrote = false;
            child.stdout!.once('data', () => {
              wrote = true;
            });
            child.stdout!.pipe(out, { end: false });
            // A reader that went away (a download cut short) ends restic instead of leaving it blocked on the pipe.
            const stop = () => child.kill('SIGINT');
            out.once('close', stop);
            const { code, stderr, timedOut } = await exit;
            out.off('close', stop);
            if (code === 0) {
              out.end();
              return;
            }
            if (out.destroyed) throw new ResticError(`dumping ${filePath} of snapshot ${snapshotId}: the reader went away`);
            const failure = resticFailure(`dumping ${filePath} of snapshot ${snapshotId}`, repo, inv, stderr, timedOut);
            if (failure.code !== 'locked' || wrote || Date.now() - started > lockWaitMs) throw failure;
          } finally {
            await inv.cleanup();
          }
          if (n === 0) await clearStaleLocks(repo);
          await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** n)));
        }
      })();
      // The stream fails too, so that a reader never takes a cut archive for a whole one: with the
      // error for a reader listening for it, else closed without its end (an 'error' nobody listens
      // for would end the process).
      done.catch((err: Error) => (out.listenerCount('error') > 0 ? out.destroy(err) : out.destroy()));
      return { stream: out, done };
    },

    /** restic's check (and a subset of the data read back when asked); a repository that cannot be opened is a ResticError. */
    async check(repo: ResticRepository, o: { readDataSubset?: string } = {}): Promise<{ ok: boolean; output: string }> {
      const subset = o.readDataSubset;
      if (subset !== undefined && !/^[0-9][0-9./%]*[kKmMgGtT]?$/.test(subset)) throw new ResticError(`not a --read-data-subset: ${subset}`);
      const ran = await attempt('checking', repo, ['check', ...(subset ? [`--read-data-subset=${subset}`] : [])]);
      const output = `${ran.stdout}${ran.stderr}`.trim();
      // Failing before "load indexes" is not a verdict on the data (no repository, wrong password, locked).
      if (ran.failure && !ran.stdout.includes('load indexes')) throw ran.failure;
      return { ok: !ran.failure, output };
    },

    /** The size of the repository's blobs as stored (compressed, encrypted), each counted once: `stats --mode raw-data`. */
    async stats(repo: ResticRepository): Promise<{ rawBytes: number }> {
      const { stdout } = await run('reading statistics', repo, ['stats', '--mode', 'raw-data', '--json']);
      const stats = jsonLine<{ total_size: number }>(stdout, '{', 'reading statistics');
      return { rawBytes: stats.total_size };
    },
  };
}

export type Restic = ReturnType<typeof createRestic>;
