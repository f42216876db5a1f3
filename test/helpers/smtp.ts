// A real SMTP server (the smtp-server package) on loopback with a random port: plain SMTP, no TLS,
// no authentication, like a local relay. It keeps every message it accepts; recipients can be
// refused to simulate a server that rejects the mail.
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';

export interface ReceivedMail {
  to: string[];
  raw: string;
}

export interface TestSmtpServer {
  url: string;
  messages: ReceivedMail[];
  /** Recipients matching this are refused at RCPT TO with 550. */
  refuse(match: (address: string) => boolean): void;
  /** Resolves with the `n`-th message (1-based) sent to `to`. */
  waitFor(to: string, n?: number, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<TestSmtpServer> {
  const messages: ReceivedMail[] = [];
  let refused: (address: string) => boolean = () => false;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (refused(address.address)) {
        const err = Object.assign(new Error('Mailbox unavailable'), { responseCode: 550 });
        return callback(err);
      }
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({ to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString('utf8') });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    refuse(match) {
      refused = match;
    },
    async waitFor(to, n = 1, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.filter((m) => m.to.includes(to));
        if (found.length >= n) return found[n - 1]!;
        if (Date.now() > deadline) throw new Error(`no mail #${n} for ${to}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The 6-digit code of a trial code mail (its plain-text part puts it on a line of its own). */
export function codeFrom(mail: ReceivedMail): string {
  const match = /^ {4}(\d{6})\r?$/m.exec(mail.raw);
  if (!match) throw new Error(`no code in mail:\n${mail.raw}`);
  return match[1]!;
}
