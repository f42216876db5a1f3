import { describe, expect, it } from 'vitest';
import { withoutHostWarning } from '../helpers/sudo-output.js';

const warning = 'sudo: unable to resolve host build-7f3a: Name or service not known';

describe("sudo's host-name warning taken out of compared output", () => {
  it('from raw stderr, alone or among other lines', () => {
    expect(withoutHostWarning(`${warning}\n`)).toBe('');
    expect(withoutHostWarning(`${warning}\noops\n`)).toBe('oops\n');
    expect(withoutHostWarning(`oops\n${warning}`)).toBe('oops\n');
  });

  it('from output as stored: a [stderr] section holding only the warning goes whole', () => {
    expect(withoutHostWarning(`root\n[stderr]\n${warning}`)).toBe('root');
    expect(withoutHostWarning(`root\n[stderr]\n${warning}\n[exit code 0]`)).toBe('root\n[exit code 0]');
    expect(withoutHostWarning(`hello\n[stderr]\n${warning}\noops\n[exit code 3]`)).toBe('hello\n[stderr]\noops\n[exit code 3]');
  });

  it('leaves everything else as it is', () => {
    for (const text of ['', 'root\n', 'hello\n[stderr]\noops\n[exit code 3]', 'sudo: a password is required\n', `echo ${warning}`]) {
      expect(withoutHostWarning(text)).toBe(text);
    }
  });
});
