// The sample stream's buffer (src/monitoring/monitor-stream.ts) against a channel the test feeds by
// hand: whatever the far side sends, what is kept waiting for a line end (before "@@ready") or for
// a sample's end (after it) never grows past the bound, and going over it ends the stream. The same
// against a real SSH channel: test/monitoring-hostile.test.ts. Needs no service.
import { describe, expect, it } from 'vitest';
import type { SshConnection, SshStream } from '../../src/core/ssh.js';
import { MAX_PENDING_BYTES, SampleStream } from '../../src/monitoring/monitor-stream.js';

/** A channel the test writes the far side's output into; it counts what was fed before it was closed. */
function fakeChannel() {
  let data: (chunk: Buffer) => void = () => {};
  let close: (code: number | null) => void = () => {};
  let fed = 0;
  let fedWhenClosed: number | null = null;
  const channel: SshStream = {
    write: () => {},
    onData: (l) => {
      data = l;
    },
    onClose: (l) => {
      close = l;
    },
    get closed() {
      return fedWhenClosed !== null;
    },
    close: () => {
      if (fedWhenClosed !== null) return;
      fedWhenClosed = fed;
      close(null);
    },
  };
  const conn = { closed: false, stream: async () => channel } as unknown as SshConnection;
  return {
    conn,
    channel,
    /** The far side sends `text` (data still arriving after a close is delivered too, as on a real channel). */
    send(text: string) {
      fed += Buffer.byteLength(text);
      data(Buffer.from(text));
    },
    fedWhenClosed: () => fedWhenClosed,
  };
}

/** Lets open() subscribe to the channel (it awaits the channel first). */
const tick = () => new Promise((r) => setImmediate(r));

/** A stream open on a fake channel: the far side sent `ready` (which starts with "@@ready\n"). */
async function openStream(ready = '@@ready\n') {
  const far = fakeChannel();
  const opening = SampleStream.open(far.conn, 60_000);
  await tick();
  far.send(ready);
  return { far, stream: await opening };
}

const PIECE = 'x'.repeat(32 * 1024); // what one SSH packet carries at most
const FLOOD = 2 * 1024 * 1024;

describe('SampleStream buffer bound', () => {
  it('before "@@ready": output without a line end fails the open at the bound and is not kept', async () => {
    const far = fakeChannel();
    const opening = SampleStream.open(far.conn, 5000);
    const failed = expect(opening).rejects.toThrow(`The monitoring loop sent more than ${MAX_PENDING_BYTES / 1024} KiB without a line end`);
    await tick();
    for (let sent = 0; sent < FLOOD; sent += PIECE.length) far.send(PIECE);
    await failed;
    // Closed at the first piece that would have gone past the bound.
    expect(far.fedWhenClosed()).toBeLessThanOrEqual(MAX_PENDING_BYTES + PIECE.length);
  });

  it('after "@@ready": a sample without its end fails the request at the bound, the buffer never past it', async () => {
    const { far, stream } = await openStream();
    const asked = stream.request(60_000);
    const failed = expect(asked).rejects.toThrow(
      `The monitoring stream sent more than ${MAX_PENDING_BYTES / 1024} KiB without ending a sample`,
    );
    let most = 0;
    for (let sent = 0; sent < FLOOD; sent += PIECE.length) {
      far.send(PIECE);
      most = Math.max(most, stream.buffered);
    }
    await failed;
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(MAX_PENDING_BYTES);
    expect(stream.buffered).toBe(0);
    expect(stream.closed).toBe(true);
  });

  it('samples well within the bound are read as before', async () => {
    const { far, stream } = await openStream('@@ready\n@@sam');
    const asked = stream.request(60_000);
    far.send(
      'ple\n@/proc/uptime\n100.00 1\n@/proc/stat\ncpu  1 0 1 10 0 0 0 0\n@/proc/meminfo\nMemTotal: 1000 kB\nMemAvailable: 500 kB\n' +
        '@/proc/net/dev\n eth0: 1 0 0 0 0 0 0 0 2 0\n@/proc/loadavg\n0.1 0.2 0.3 1/1 1\n@df\nFilesystem\n/dev/x 10 4 5 45% /\n@@end\n',
    );
    expect(await asked).toMatchObject({ uptime: 100, memTotal: 1000 * 1024, netTx: 2 });
    expect(stream.buffered).toBe(0);
  });
});
