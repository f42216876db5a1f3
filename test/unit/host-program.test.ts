// Host programs run from their files with their arguments quoted one by one: a hostile argument
// is data, never shell.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { pythonCommand, shCommand } from '../../src/core/host-program.js';

const run = (command: string) => execFileSync('/bin/sh', ['-c', command], { encoding: 'utf8' });

describe('host program command lines', () => {
  it('gives a shell program its arguments as $1…, quotes and all', () => {
    const program = 'set -eu\nprintf "%s|%s|%s\\n" "$0" "$1" "$2"';
    expect(run(shCommand(program, 'show-args', "it's; rm -rf /", 42))).toBe("show-args|it's; rm -rf /|42\n");
  });

  it('gives a Python program its arguments in sys.argv', () => {
    const program = 'import sys\nprint("|".join(sys.argv[1:]))';
    expect(run(pythonCommand(program, '$(id)', "a'b"))).toBe("$(id)|a'b\n");
  });
});
