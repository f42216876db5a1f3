// SSH connections without a network, for unit tests of the parts that hold them (the SSH pool, the
// monitor runner's connection keeper): a connection runs the monitoring commands as a monitored
// host would, with the sections of procSections(). A host whose shell cannot run the streaming
// loop (`loop: false`) ends the stream at once, as fish does. The real client is exercised against
// a real sshd by the integration tests.
import type { SshConnection, SshStream } from '../../src/core/ssh.js';
import { procSections } from './fake-ssh-host.js';

export interface FakeConnection extends SshConnection {
  /** Streams opened on it. */
  readonly streams: SshStream[];
}

export function fakeConnection({ loop = true }: { loop?: boolean } = {}): FakeConnection {
  const streams: SshStream[] = [];
  let closed = false;
  const conn: FakeConnection = {
    hostKey: 'ssh-ed25519 SHA256:fake',
    streams,
    get closed() {
      return closed;
    },
    /** The per-poll command: as many samples as it asks for. */
    async exec(command) {
      const stdout = `@@sample\n${procSections()}`.repeat(command.split('echo @@sample').length - 1);
      return { exitCode: 0, signal: null, stdout, stderr: '', truncated: false, timedOut: false };
    },
    async stream() {
      const channel = fakeLoop(loop);
      streams.push(channel);
      return channel;
    },
    close() {
      closed = true;
      for (const s of streams) s.close();
    },
  };
  return conn;
}

/** The streaming loop's channel: "@@ready", then a sample for every line written; or, without the loop, an end at once. */
function fakeLoop(loop: boolean): SshStream {
  let data: (chunk: Buffer) => void = () => {};
  let ended: (code: number | null) => void = () => {};
  let closed = false;
  const send = (text: string) => setImmediate(() => !closed && data(Buffer.from(text)));
  const close = (code: number | null) => {
    if (closed) return;
    closed = true;
    ended(code);
  };
  const channel: SshStream = {
    write: (text) => {
      for (const c of text) if (c === '\n') send(`@@sample\n${procSections()}@@end\n`);
    },
    onData: (l) => {
      data = l;
      if (loop) send('@@ready\n');
      else setImmediate(() => close(127));
    },
    onClose: (l) => {
      ended = l;
    },
    get closed() {
      return closed;
    },
    close: () => close(null),
  };
  return channel;
}
