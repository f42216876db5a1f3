// A move streams the filestore host → svc → host: the sender's SSH channel is piped into the
// receiver's input. The receiving tar stops reading at the archive's end marker, its command ends,
// and the SSH client destroys the input it did not read to the end. What the sender still has to
// give (the archive's padding) must then be dropped, not left unread: a channel whose output is
// unread never ends, and the move waited in its freeze until the copy's timeout.
import { once } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { forwardWhileOpen } from '../../src/moves/move-copy.js';

const CHUNKS = 64;
const CHUNK = 16 * 1024;

/** The sender's channel: 1 MB in 16 KB chunks, each made when asked for (so it waits on its reader). */
function sender() {
  let made = 0;
  return new Readable({
    read() {
      this.push(made < CHUNKS ? Buffer.alloc(CHUNK, made++) : null);
    },
  });
}

/** The receiver stops reading with the input full (the rest unread), and the input is destroyed. */
async function receiverEnds(input: PassThrough) {
  for (let i = 0; i < 10; i++) await tick();
  expect(input.readableLength).toBeGreaterThan(0);
  input.destroy();
  for (let i = 0; i < 10; i++) await tick();
}

describe('the filestore stream of a move once the receiver has ended', () => {
  it('piped straight into the destroyed input, the sender is left paused, its output unread: it never ends (what hung)', async () => {
    const input = new PassThrough();
    const source = sender();
    source.pipe(input);
    await receiverEnds(input);
    expect({ ended: source.readableEnded, flowing: source.readableFlowing }).toEqual({ ended: false, flowing: false });
    source.destroy();
  });

  it('through forwardWhileOpen, what is left is dropped and the sender runs to its end', async () => {
    const input = new PassThrough();
    const source = sender();
    const forwarded = forwardWhileOpen(input);
    const finished = once(forwarded, 'finish');
    source.pipe(forwarded);
    await receiverEnds(input);
    await finished;
    expect(source.readableEnded).toBe(true);
  });

  it('while the input is read, all of it arrives and the input ends with the sender', async () => {
    const input = new PassThrough();
    const got: Buffer[] = [];
    input.on('data', (b: Buffer) => got.push(b));
    const ended = once(input, 'end');
    sender().pipe(forwardWhileOpen(input));
    await ended;
    expect(Buffer.concat(got).length).toBe(CHUNKS * CHUNK);
  });
});
