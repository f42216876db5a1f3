// When to write the sudo password. A command run through `sudo -S -p <prompt>` shows two random
// tokens on its stderr: sudo's prompt when (and only when) it wants the password, and a start line
// the command prints first once sudo let it run. The password is written for the first prompt seen
// before the start line, and never otherwise: on an account whose sudo asks for nothing (NOPASSWD,
// whatever the record says) it never reaches the command's standard input. The command's own input
// follows the start line. Both tokens are taken out of the output.
import { randomBytes } from 'node:crypto';

export interface SudoHandshakeEvents {
  /** sudo asks for the password: `count` 1 the first time, more after a refused one. */
  onPrompt(count: number): void;
  /** sudo let the command start: its input may be written now. */
  onStarted(): void;
  /** stderr as it should be kept, tokens taken out. */
  onOutput(chunk: Buffer): void;
}

export interface SudoHandshake {
  /** For `sudo -p`: hex and dashes only, so sudo's `%` escapes never apply. */
  readonly prompt: string;
  /** What the command prints (with a line break) before anything else. */
  readonly started: string;
  /** Feeds the command's stderr. */
  feed(chunk: Buffer): void;
  /** The stream ended: what was held back (the possible start of a token) is output. */
  end(): void;
}

export function sudoHandshake(events: SudoHandshakeEvents): SudoHandshake {
  const token = randomBytes(16).toString('hex');
  const prompt = `svc-sudo-prompt-${token}:`;
  const started = `svc-sudo-started-${token}`;
  const promptBytes = Buffer.from(prompt);
  const startedBytes = Buffer.from(`${started}\n`);
  // Held back at the end of what was seen: it may be the first part of a token still on its way.
  const holdBack = Math.max(promptBytes.length, startedBytes.length) - 1;
  let pending = Buffer.alloc(0);
  let prompts = 0;
  let running = false;
  const emit = (chunk: Buffer) => {
    if (chunk.length > 0) events.onOutput(chunk);
  };

  return {
    prompt,
    started,
    feed(chunk) {
      if (running) return emit(chunk);
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const p = pending.indexOf(promptBytes);
        const s = pending.indexOf(startedBytes);
        if (s >= 0 && (p < 0 || s < p)) {
          // Anything after the start line is the command's: a prompt printed there is not sudo's.
          emit(pending.subarray(0, s));
          const rest = pending.subarray(s + startedBytes.length);
          pending = Buffer.alloc(0);
          running = true;
          events.onStarted();
          return emit(rest);
        }
        if (p < 0) break;
        emit(pending.subarray(0, p));
        pending = pending.subarray(p + promptBytes.length);
        events.onPrompt(++prompts);
      }
      const keep = Math.min(pending.length, holdBack);
      emit(pending.subarray(0, pending.length - keep));
      pending = pending.subarray(pending.length - keep);
    },
    end() {
      if (running) return;
      emit(pending);
      pending = Buffer.alloc(0);
    },
  };
}
