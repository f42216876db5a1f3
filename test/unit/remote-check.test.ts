// `session.check`: a remote step that must succeed fails loudly, with what it was and the end of
// what the command said, secrets masked; exit code 3 is the host program's own worded refusal.
import { describe, expect, it } from 'vitest';
import { UserError } from '../../src/core/errors.js';
import type { ExecResult } from '../../src/core/ssh.js';
import { checkedResult } from '../../src/servers/remote-session.js';

const session = { mask: (text: string) => text.replaceAll('s3cret', '********') };
const result = (r: Partial<ExecResult>): ExecResult => ({
  exitCode: 0,
  signal: null,
  stdout: '',
  stderr: '',
  truncated: false,
  timedOut: false,
  ...r,
});
const failure = (r: Partial<ExecResult>, timeoutMs?: number) => {
  try {
    checkedResult(session, 'Copying the filestore failed', result(r), timeoutMs);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('checkedResult did not throw');
};

describe('checkedResult', () => {
  it('answers the result of a command that exited 0', () => {
    const ok = result({ stdout: 'done\n' });
    expect(checkedResult(session, 'Copying', ok)).toBe(ok);
  });

  it('fails with what the step was, its output and exit code, masked', () => {
    const message = failure({ exitCode: 1, stdout: 'copied 3 files', stderr: 'cp: password s3cret refused' });
    expect(message).toBe('Copying the filestore failed: copied 3 files\n[stderr]\ncp: password ******** refused\n[exit code 1]');
  });

  it("takes exit code 3's stderr alone as the reason: the program worded its refusal", () => {
    expect(failure({ exitCode: 3, stdout: 'noise', stderr: 'the database acme is in use\n' })).toBe(
      'Copying the filestore failed: the database acme is in use',
    );
  });

  it('fails a command that timed out or was killed even when no exit code says so', () => {
    expect(failure({ exitCode: null, timedOut: true }, 60_000)).toContain('[timed out after 60 s; command killed]');
    expect(failure({ exitCode: null, signal: 'KILL' })).toContain('[ended by signal KILL]');
  });

  it('keeps only the end of a long output', () => {
    const message = failure({ exitCode: 2, stdout: `${'x'.repeat(5000)}END` });
    expect(message.length).toBeLessThan(2100);
    expect(message).toContain('END');
  });
});
