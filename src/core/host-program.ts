// Host-side programs are files beside their feature (`src/<feature>/host/*.sh|*.py`), linted by
// shellcheck and pylint (scripts/lint-host.sh) and runnable alone; this reads one and makes the
// command line that runs it over SSH, its arguments quoted one by one (never spliced into its text).
import { readFileSync } from 'node:fs';
import { shellQuote } from './ssh.js';

/** The Python every host runs svc's programs with (Debian's; Odoo's own packages are installed for it). */
export const HOST_PYTHON = '/usr/bin/python3';

/** A program's text, read once at import: `hostProgram(new URL('./host/x.sh', import.meta.url))`. */
export function hostProgram(file: URL): string {
  return readFileSync(file, 'utf8');
}

/** `sh -c <program> <name> <args…>`: the program sees its arguments as "$1"…, as when run as a file. */
export function shCommand(program: string, name: string, ...args: readonly (string | number)[]): string {
  return ['/bin/sh', '-c', shellQuote(program), shellQuote(name), ...args.map((a) => shellQuote(String(a)))].join(' ');
}

/** `python3 -c <program> <args…>`: the program sees its arguments in sys.argv[1:]. */
export function pythonCommand(program: string, ...args: readonly (string | number)[]): string {
  return [HOST_PYTHON, '-c', shellQuote(program), ...args.map((a) => shellQuote(String(a)))].join(' ');
}
