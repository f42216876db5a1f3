// What push_commit runs on the root server (host/deploy.sh, host/validate_tree.py). Layout, next to the live path:
//   <dir>/<name>                      the live path: a symlink to the current release
//   <dir>/.releases/<name>/r-<seq>-<sha12>  one release per deploy; the newest few are kept
// The commit's tree arrives on stdin as the git host's tarball (.tar.gz, one top-level directory),
// streamed by the service: no git and no credential on the server. The service reads its tar headers
// on the way (tar-entries.ts) and stops it before any entry that would land outside the release
// directory under --strip-components=1 (`top//etc/x` becomes `/etc/x`). It is unpacked into a new
// release directory, checked (every .py compiled by py_compile, every .xml parsed, nothing but
// files, directories and symlinks, in one python3 process), and only then is the live symlink replaced by rename(2), which is atomic: readers see
// the old release or the new one, never a mix. A failed unpack or check removes the release and
// leaves the live path alone. (A cache.git left by the earlier git-fetch deploys is removed.)
// Deploys of one path run one at a time (flock), and one queued earlier never replaces a newer one
// (the seq, the job's creation time, is recorded with each switch). Every value is an argument of
// the program, and the sha is a checked commit id (git-host.ts) before it gets here.
import path from 'node:path';
import { z } from 'zod';
import { hostProgram, shCommand } from '../core/host-program.js';
import { checkCommitId } from './git-host.js';

export const KEPT_RELEASES = 5;

/** Exit codes of host/deploy.sh that are outcomes, not crashes. */
export const DEPLOY_EXIT = { invalid: 4, busy: 75 } as const;

export interface DeployPlan {
  sha: string;
  livePath: string;
  /** Orders deploys of one path: a lower seq never replaces a higher one. */
  seq: number;
}

export function releasesDir(livePath: string): string {
  return path.posix.join(path.posix.dirname(livePath), '.releases', path.posix.basename(livePath));
}

const DEPLOY = hostProgram(new URL('./host/deploy.sh', import.meta.url));
/** The check of the unpacked tree, given to deploy.sh as its last argument (run with the host's python3). */
const VALIDATE_TREE = hostProgram(new URL('./host/validate_tree.py', import.meta.url));

/** The command that deploys `plan` (host/deploy.sh), the commit's tarball on its stdin. */
export function deployScript(plan: DeployPlan): string {
  const sha = checkCommitId(plan.sha, 'The commit to deploy');
  const base = releasesDir(plan.livePath);
  const release = `${base}/r-${String(plan.seq).padStart(13, '0')}-${sha.slice(0, 12)}`;
  return shCommand(DEPLOY, 'svc-deploy', plan.livePath, base, release, sha, Math.trunc(plan.seq), KEPT_RELEASES, VALIDATE_TREE);
}

const validationReport = z.object({
  checked: z.object({ py: z.number(), xml: z.number() }),
  invalid: z.array(z.object({ file: z.string(), error: z.string() })),
});
export type ValidationReport = z.infer<typeof validationReport>;

/** What the script printed: the validation report, and how it ended. The server's output is checked, not trusted. */
export function readDeployOutput(stdout: string): { report: ValidationReport | null; deployedTo: string | null; superseded: boolean } {
  const line = (prefix: string) =>
    stdout
      .split('\n')
      .find((l) => l.startsWith(prefix))
      ?.slice(prefix.length)
      .trim() ?? null;
  let report: ValidationReport | null = null;
  try {
    report = validationReport.parse(JSON.parse(line('SVC-RESULT ') ?? 'null'));
  } catch {
    report = null;
  }
  return { report, deployedTo: line('SVC-DEPLOYED '), superseded: line('SVC-SUPERSEDED') !== null };
}
