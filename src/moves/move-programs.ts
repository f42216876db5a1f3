// What a move runs on the two Odoo hosts (over SSH; the programs are host/*.sh): the filestore goes
// from one to the other as a tar stream through the service, the files the target already has left
// out (Odoo never changes a stored file, it only adds and removes them), so the pass in the freeze
// sends only what is new; then it removes on the target what the source no longer has.
import { hostProgram, shCommand } from '../core/host-program.js';

const program = (name: string) => ({ name, text: hostProgram(new URL(`./host/${name}`, import.meta.url)) });
const LIST_FILES = program('list-files.sh');
const SEND_MISSING = program('send-missing.sh');
const RECEIVE = program('receive.sh');
const LIST_FOR_MIRROR = program('list-for-mirror.sh');
const REMOVE_MISSING = program('remove-missing.sh');
const FILESTORE_BYTES = program('filestore-bytes.sh');

/** The last record of a complete list (never a file: every path `find` prints starts with `./`). */
const END_OF_LIST = 'svc:end-of-list';

const run = (p: { name: string; text: string }, ...args: string[]) => shCommand(p.text, p.name, ...args);

/** The files of a filestore, one relative path a line, sorted (nothing when there is none yet). */
export const listFilesScript = (dir: string) => run(LIST_FILES, dir);

/** A tar (on stdout) of the files under `dir` missing from the list read on stdin; the count goes to stderr. */
export const sendMissingScript = (dir: string) => run(SEND_MISSING, dir);

/** Unpacks the tar on stdin into `dir` (made when missing), owned as the filestores' directory is (odoo). */
export const receiveScript = (dir: string) => run(RECEIVE, dir);

/** The files under `dir`, NUL-separated, then END_OF_LIST: only once the whole listing succeeded. */
export const listForMirrorScript = (dir: string) => run(LIST_FOR_MIRROR, dir, END_OF_LIST);

/** Removes from `dir` the files missing from the source's whole list on stdin (listForMirrorScript). */
export const removeMissingScript = (dir: string) => run(REMOVE_MISSING, dir, END_OF_LIST);

/** Bytes of a filestore (0 when there is none). */
export const filestoreBytesScript = (dir: string) => run(FILESTORE_BYTES, dir);
