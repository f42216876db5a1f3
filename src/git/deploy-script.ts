// The shell script push_commit runs on the root server (DESIGN §7). Layout, next to the live path:
//   <dir>/<name>                      the live path: a symlink to the current release
//   <dir>/.releases/<name>/cache.git  a bare repository keeping fetched objects between deploys
//   <dir>/.releases/<name>/r-<seq>-<sha12>  one release per deploy; the newest few are kept
// The commit is fetched into the cache, exported with `git archive` into a new release directory,
// checked (every .py compiled by py_compile, every .xml parsed, in one python3 process), and only
// then is the live symlink replaced by rename(2), which is atomic: readers see the old release or
// the new one, never a mix. A failed check removes the release and leaves the live path alone.
// The account token arrives on stdin and lives in an environment variable of this shell only: it is
// never on a command line, in a file or in git's config (credential helpers are reset for the fetch).
// Deploys of one path run one at a time (flock), and one queued earlier never replaces a newer one
// (the seq, the job's creation time, is recorded with each switch).
import path from 'node:path';
import { shellQuote } from '../core/ssh.js';

export const KEPT_RELEASES = 5;

/** Exit codes of the script that are outcomes, not crashes. */
export const DEPLOY_EXIT = { invalid: 4, busy: 75 } as const;

export interface DeployPlan {
  cloneUrl: string;
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
export const VALIDATE_PY = String.raw`
import json, os, py_compile, shutil, sys, tempfile
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
            if name.endswith(".py"):
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
  const base = releasesDir(plan.livePath);
  const release = `${base}/r-${String(plan.seq).padStart(13, '0')}-${plan.sha.slice(0, 12)}`;
  const q = shellQuote;
  return `set -eu
IFS= read -r SVC_GIT_TOKEN || true
export SVC_GIT_TOKEN GIT_TERMINAL_PROMPT=0
LIVE=${q(plan.livePath)}; BASE=${q(base)}; REL=${q(release)}; SHA=${q(plan.sha)}; SEQ=${plan.seq}
mkdir -p "$BASE" "$(dirname "$LIVE")"
exec 9>"$BASE/.lock"
flock -w 600 9 || { echo "another deploy of $LIVE is still running" >&2; exit ${DEPLOY_EXIT.busy}; }
LAST=$(cat "$BASE/.deployed-seq" 2>/dev/null || echo 0)
if [ "$LAST" -gt "$SEQ" ]; then echo "SVC-SUPERSEDED $(cat "$BASE/.deployed-sha" 2>/dev/null)"; exit 0; fi
[ -d "$BASE/cache.git" ] || git init -q --bare "$BASE/cache.git"
git --git-dir="$BASE/cache.git" -c credential.helper= -c credential.interactive=never \\
  -c credential.helper='!f() { echo username=x-access-token; echo "password=$SVC_GIT_TOKEN"; }; f' \\
  fetch -q --no-tags --depth 1 ${q(plan.cloneUrl)} "$SHA"
rm -rf "$REL"; mkdir -p "$REL"
git --git-dir="$BASE/cache.git" archive -o "$BASE/.release.tar" "$SHA"
tar -xf "$BASE/.release.tar" -C "$REL"; rm -f "$BASE/.release.tar"
if ! python3 -c ${q(VALIDATE_PY)} "$REL"; then rm -rf "$REL"; exit ${DEPLOY_EXIT.invalid}; fi
if [ -e "$LIVE" ] && [ ! -L "$LIVE" ]; then mv "$LIVE" "$BASE/before-svc-$SEQ"; echo "moved the existing $LIVE to $BASE/before-svc-$SEQ"; fi
ln -sfn "$REL" "$LIVE.svc-new"
mv -Tf "$LIVE.svc-new" "$LIVE"
echo "$SEQ" > "$BASE/.deployed-seq"; echo "$SHA" > "$BASE/.deployed-sha"
ls -1d "$BASE"/r-* | sort | head -n -${KEPT_RELEASES} | while read -r OLD; do [ "$OLD" = "$REL" ] || rm -rf "$OLD"; done
echo "SVC-DEPLOYED $REL"
`;
}

export interface ValidationReport {
  checked: { py: number; xml: number };
  invalid: { file: string; error: string }[];
}

/** What the script printed: the validation report, and how it ended. */
export function readDeployOutput(stdout: string): { report: ValidationReport | null; deployedTo: string | null; superseded: boolean } {
  const line = (prefix: string) => stdout.split('\n').find((l) => l.startsWith(prefix))?.slice(prefix.length).trim() ?? null;
  const result = line('SVC-RESULT ');
  return {
    report: result ? (JSON.parse(result) as ValidationReport) : null,
    deployedTo: line('SVC-DEPLOYED '),
    superseded: line('SVC-SUPERSEDED') !== null,
  };
}
