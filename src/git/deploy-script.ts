// The shell script push_commit runs on the root server. Layout, next to the live path:
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
// (the seq, the job's creation time, is recorded with each switch). Every value interpolated here
// is shell-quoted, and the sha is a checked commit id (git-host.ts) before it gets here.
import path from 'node:path';
import { z } from 'zod';
import { shellQuote } from '../core/ssh.js';
import { checkCommitId } from './git-host.js';

export const KEPT_RELEASES = 5;

/** Exit codes of the script that are outcomes, not crashes. */
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

// Every .py through py_compile (what `python3 -m py_compile` does, in one process for the whole
// tree instead of one interpreter per file) and every .xml through an XML parser.
export const VALIDATE_PY = `
import json, os, py_compile, shutil, stat, sys, tempfile
import xml.etree.ElementTree as ET
root = sys.argv[1]
tmp = tempfile.mkdtemp()
invalid, checked = [], {"py": 0, "xml": 0}
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                # Not followed: a target in the tree is checked as the file it is, and one outside
                # (say /dev/zero) is not the commit's to check.
                continue
            if not stat.S_ISREG(mode):
                # A git tree holds files and symlinks only: a device, FIFO or socket came from elsewhere.
                invalid.append({"file": rel, "error": "not a regular file or symlink (a device, FIFO or socket)"})
            elif name.endswith(".py"):
                checked["py"] += 1
                py_compile.compile(path, cfile=os.path.join(tmp, "c.pyc"), doraise=True)
            elif name.endswith(".xml"):
                checked["xml"] += 1
                ET.parse(path)
        except py_compile.PyCompileError as e:
            v = e.exc_value
            line = getattr(v, "lineno", None)
            invalid.append({"file": rel, "error": "%s%s: %s" % (type(v).__name__, " at line %s" % line if line else "", getattr(v, "msg", None) or v)})
        except ET.ParseError as e:
            invalid.append({"file": rel, "error": "XML: %s" % e})
        except Exception as e:
            invalid.append({"file": rel, "error": "%s: %s" % (type(e).__name__, e)})
shutil.rmtree(tmp, ignore_errors=True)
print("SVC-RESULT " + json.dumps({"checked": checked, "invalid": invalid}))
sys.exit(4 if invalid else 0)
`;

export function deployScript(plan: DeployPlan): string {
  const sha = checkCommitId(plan.sha, 'The commit to deploy');
  const base = releasesDir(plan.livePath);
  const release = `${base}/r-${String(plan.seq).padStart(13, '0')}-${sha.slice(0, 12)}`;
  const q = shellQuote;
  return `set -eu
LIVE=${q(plan.livePath)}; BASE=${q(base)}; REL=${q(release)}; SHA=${q(sha)}; SEQ=${Math.trunc(plan.seq)}
mkdir -p "$BASE" "$(dirname "$LIVE")"
exec 9>"$BASE/.lock"
flock -w 600 9 || { echo "another deploy of $LIVE is still running" >&2; exit ${DEPLOY_EXIT.busy}; }
LAST=$(cat "$BASE/.deployed-seq" 2>/dev/null || echo 0)
if [ "$LAST" -gt "$SEQ" ]; then echo "SVC-SUPERSEDED $(cat "$BASE/.deployed-sha" 2>/dev/null)"; exit 0; fi
rm -rf "$BASE/cache.git" "$REL"; mkdir -p "$REL"
trap 'rm -rf "$REL"' EXIT
tar -xzf - -C "$REL" --strip-components=1 --no-same-owner --no-same-permissions
if ! python3 -c ${q(VALIDATE_PY)} "$REL"; then exit ${DEPLOY_EXIT.invalid}; fi
if [ -e "$LIVE" ] && [ ! -L "$LIVE" ]; then mv "$LIVE" "$BASE/before-svc-$SEQ"; echo "moved the existing $LIVE to $BASE/before-svc-$SEQ"; fi
ln -sfn "$REL" "$LIVE.svc-new"
mv -Tf "$LIVE.svc-new" "$LIVE"
trap - EXIT
echo "$SEQ" > "$BASE/.deployed-seq"; echo "$SHA" > "$BASE/.deployed-sha"
ls -1d "$BASE"/r-* | sort | head -n -${KEPT_RELEASES} | while read -r OLD; do [ "$OLD" = "$REL" ] || rm -rf "$OLD"; done
echo "SVC-DEPLOYED $REL"
`;
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
