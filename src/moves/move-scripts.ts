// What a move runs on the two Odoo hosts (over SSH): the filestore goes from one to the other as a
// tar stream through the service, the files the target already has left out (Odoo never changes a
// stored file, it only adds and removes them), so the pass in the freeze sends only what is new.
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

/** Unpacks the tar on stdin into `dir` (made when missing), owned by odoo. */
export function receiveScript(dir: string): string {
  const parent = dir.slice(0, dir.lastIndexOf('/'));
  return [
    `[ -d ${q(parent)} ] || { mkdir -p ${q(parent)} && chown odoo:odoo ${q(parent)}; } || exit 1`,
    `mkdir -p ${q(dir)} && tar -C ${q(dir)} -xf - --no-same-owner && chown -R odoo:odoo ${q(dir)} || exit 1`,
    `echo "$(find ${q(dir)} -type f | wc -l) file(s) in ${dir}"`,
  ].join('\n');
}

/** Bytes free where the host keeps Odoo's data. */
export const freeBytesScript = (dataDir: string) => `df -B1 --output=avail ${q(dataDir)} | tail -n 1`;

/** Bytes of a filestore (0 when there is none). */
export const filestoreBytesScript = (dir: string) => `if [ -d ${q(dir)} ]; then du -sb ${q(dir)} | cut -f1; else echo 0; fi`;
