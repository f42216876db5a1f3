// What a move runs on the two Odoo hosts (over SSH): the filestore goes from one to the other as a
// tar stream through the service, the files the target already has left out (Odoo never changes a
// stored file, it only adds and removes them), so the pass in the freeze sends only what is new;
// then it removes on the target what the source no longer has.
import { shellQuote as q } from '../core/ssh.js';

/** The files of a filestore, one relative path a line, sorted (nothing when there is none yet). */
export function listFilesScript(dir: string): string {
  return `if [ -d ${q(dir)} ]; then cd ${q(dir)} && find . -type f | LC_ALL=C sort; fi`;
}

/**
 * A tar (on stdout) of the files under `dir` missing from the list read on stdin. A file Odoo
 * removed meanwhile is left out (--ignore-failed-read); the count goes to stderr.
 */
export function sendMissingScript(dir: string): string {
  return [
    'tmp=$(mktemp -d) || exit 1',
    `trap 'rm -rf "$tmp"' EXIT`,
    'LC_ALL=C sort > "$tmp/have"',
    `if [ -d ${q(dir)} ]; then cd ${q(dir)} && find . -type f | LC_ALL=C sort > "$tmp/all" || exit 1; else : > "$tmp/all"; cd /; fi`,
    'LC_ALL=C comm -23 "$tmp/all" "$tmp/have" > "$tmp/send"',
    'echo "$(wc -l < "$tmp/send") file(s) sent" >&2',
    'tar -cf - --no-recursion --ignore-failed-read -T "$tmp/send"',
  ].join('\n');
}

/** Unpacks the tar on stdin into `dir` (made when missing), owned as the filestores' directory is (odoo). */
export function receiveScript(dir: string): string {
  const parent = dir.slice(0, dir.lastIndexOf('/'));
  return [
    `[ -d ${q(parent)} ] || { mkdir -p ${q(parent)} && chown odoo:odoo ${q(parent)}; } || exit 1`,
    `mkdir -p ${q(dir)} && tar -C ${q(dir)} -xf - --no-same-owner && chown -R --reference=${q(parent)} ${q(dir)} || exit 1`,
    `echo "$(find ${q(dir)} -type f | wc -l) file(s) in ${dir}"`,
  ].join('\n');
}

/** The last record of a complete list (never a file: every path `find` prints starts with `./`). */
const END_OF_LIST = 'svc:end-of-list';

/** The files under `dir`, NUL-separated (any name survives), then END_OF_LIST: only once the whole listing succeeded. */
export function listForMirrorScript(dir: string): string {
  return [
    'tmp=$(mktemp -d) || exit 1',
    `trap 'rm -rf "$tmp"' EXIT`,
    `if [ -d ${q(dir)} ]; then cd ${q(dir)} && find . -type f -print0 > "$tmp/all" || exit 1; else : > "$tmp/all"; fi`,
    'cat "$tmp/all"',
    `printf '%s\\0' ${END_OF_LIST}`,
  ].join('\n');
}

/**
 * Removes from `dir` the regular files missing from the source's list on stdin (listForMirrorScript).
 * Nothing is removed unless the list arrived whole (it ends with END_OF_LIST), and only files this
 * host's own `find` lists inside `dir`, with paths relative to it: `find` never follows a symbolic
 * link, and `dir` itself must not be one, so nothing outside the tenant's filestore is touched.
 */
export function removeMissingScript(dir: string): string {
  return [
    'tmp=$(mktemp -d) || exit 1',
    `trap 'rm -rf "$tmp"' EXIT`,
    'cat > "$tmp/in" || exit 1',
    `[ "$(tail -z -n 1 "$tmp/in" | tr -d '\\000')" = ${END_OF_LIST} ] || { echo "the source's list of files ended early: nothing removed" >&2; exit 1; }`,
    `[ -L ${q(dir)} ] && { echo ${q(`${dir} is a symbolic link: nothing removed`)} >&2; exit 1; }`,
    `[ -d ${q(dir)} ] || { echo "0 file(s) removed"; exit 0; }`,
    'head -z -n -1 "$tmp/in" | LC_ALL=C sort -z > "$tmp/keep" || exit 1',
    `cd ${q(dir)} && find . -type f -print0 | LC_ALL=C sort -z > "$tmp/have" || exit 1`,
    'LC_ALL=C comm -z -13 "$tmp/keep" "$tmp/have" > "$tmp/gone" || exit 1',
    `xargs -0 -r rm -f -- < "$tmp/gone" || exit 1`,
    `printf '%s file(s) removed from %s\\n' "$(tr -cd '\\000' < "$tmp/gone" | wc -c)" ${q(dir)}`,
  ].join('\n');
}

/** Bytes of a filestore (0 when there is none). */
export const filestoreBytesScript = (dir: string) => `if [ -d ${q(dir)} ]; then du -sb ${q(dir)} | cut -f1; else echo 0; fi`;
