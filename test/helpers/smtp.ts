// A real SMTP server (the smtp-server package) on loopback with a random port: plain SMTP, no TLS,
// no authentication, like a local relay. It keeps every message it accepts; recipients can be
// refused to simulate a server that rejects the mail.
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

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

/** The plain-text part of a mail, quoted-printable decoded (UTF-8). */
export function textOf(mail: ReceivedMail): string {
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(mail.raw)![1]!;
  const part = mail.raw.split(`\r\n--${boundary}`).find((p) => /Content-Type: text\/plain/i.test(p))!;
  const body = part.slice(part.indexOf('\r\n\r\n') + 4);
  const bytes = body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
  return Buffer.from(bytes, 'latin1').toString('utf8');
}

/**
 * The SMTP server of a test file, started before its tests and closed after them. Call it before
 * useTestApp() (whose env thunk reads `url`), so that it closes after the app.
 */
export function useSmtpServer(): TestSmtpServer {
  const smtp = {} as TestSmtpServer;
  beforeAll(async () => {
    Object.assign(smtp, await startSmtpServer());
  });
  afterAll(async () => {
    await smtp.close?.();
  });
  return smtp;
}
