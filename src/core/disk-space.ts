// Room on a disk as the machine that has it sees it: one shell command (run over SSH on an Odoo host,
// or by a PostgreSQL server itself in its data directory) printing the bytes free and which file
// system of which machine that is, so two measures can tell whether they are of one disk.
import { shellQuote } from './ssh.js';

export interface DiskSpace {
  /** Bytes free to unprivileged users (df's `avail`). */
  freeBytes: number;
  /** The file system's id and the machine's id: equal for two directories of one disk. */
  fileSystem: string;
}

/** Prints three lines: bytes free where `dir` is, its file system's id, the machine's id. */
export function diskSpaceScript(dir: string): string {
  const d = shellQuote(dir);
  return `df -B1 --output=avail ${d} | tail -n 1 && stat -f -c %i ${d} && { cat /etc/machine-id 2>/dev/null || hostname; }`;
}

/** What diskSpaceScript printed; throws when it is not that. */
export function parseDiskSpace(output: string): DiskSpace {
  const [free, fs, machine] = output
    .trim()
    .split('\n')
    .map((line) => line.trim());
  if (!free || !/^\d+$/.test(free) || !fs || !machine) throw new Error(`Unexpected answer of df/stat: ${output.slice(0, 200)}`);
  return { freeBytes: Number(free), fileSystem: `${machine}:${fs}` };
}
