// When the sudo password is written (src/core/sudo-handshake.ts), on plain chunks of stderr: for
// sudo's own prompt before the command starts, never for one printed after it or by anything else,
// whatever the chunking. Needs no service.
import { describe, expect, it } from 'vitest';
import { sudoHandshake } from '../../src/core/sudo-handshake.js';

function run(chunksOf: (h: { prompt: string; started: string }) => string[], opts: { bytewise?: boolean } = {}) {
  const events: string[] = [];
  let output = '';
  const h = sudoHandshake({
    onPrompt: (n) => events.push(`prompt ${n}`),
    onStarted: () => events.push('started'),
    onOutput: (chunk) => {
      output += chunk.toString();
    },
  });
  for (const chunk of chunksOf(h)) {
    if (opts.bytewise) for (const byte of Buffer.from(chunk)) h.feed(Buffer.from([byte]));
    else h.feed(Buffer.from(chunk));
  }
  h.end();
  return { events, output };
}

describe('sudoHandshake', () => {
  it('uses random tokens sudo takes as they are (no % escapes)', () => {
    const a = sudoHandshake({ onPrompt() {}, onStarted() {}, onOutput() {} });
    const b = sudoHandshake({ onPrompt() {}, onStarted() {}, onOutput() {} });
    expect(a.prompt).toMatch(/^svc-sudo-prompt-[0-9a-f]{32}:$/);
    expect(a.prompt).not.toBe(b.prompt);
  });

  it('prompt, then the start line: the password once, then the input; both tokens out of the output', () => {
    for (const bytewise of [false, true]) {
      const r = run((h) => [`lecture\n${h.prompt}`, `${h.started}\nfrom the command\n`], { bytewise });
      expect(r).toEqual({ events: ['prompt 1', 'started'], output: 'lecture\nfrom the command\n' });
    }
  });

  it('no prompt before the start line (NOPASSWD): no password at all', () => {
    const r = run((h) => [`${h.started}\ncat: ${h.prompt}\n`]);
    expect(r.events).toEqual(['started']);
    // Printed by the command: output, not a prompt.
    expect(r.output).toMatch(/^cat: svc-sudo-prompt-[0-9a-f]{32}:\n$/);
  });

  it('a refused password: the second prompt is counted, so the caller can end the input', () => {
    const r = run((h) => [h.prompt, `Sorry, try again.\n${h.prompt}`, 'sudo: 1 incorrect password attempt\n']);
    expect(r).toEqual({ events: ['prompt 1', 'prompt 2'], output: 'Sorry, try again.\nsudo: 1 incorrect password attempt\n' });
  });

  it('output that only looks like the start of a token is kept whole when the stream ends', () => {
    expect(run(() => ['sudo: not found\nsvc-sudo-'])).toEqual({ events: [], output: 'sudo: not found\nsvc-sudo-' });
  });
});
