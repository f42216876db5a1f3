// Mail without an SMTP relay: each mail is an .eml file in MAIL_DIR, the message nodemailer would
// have sent over SMTP (RFC 5322 headers, CRLF lines, a text and an HTML part), and the log names the
// folder once. End to end: a visitor's trial code mail is a file, and the code in it is accepted.
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMailer } from '../src/core/mail.js';
import { useTestApp } from './helpers/app.js';
import { codeFrom, textOf, type ReceivedMail } from './helpers/smtp.js';
import { createTrialPackage, injectTransport, Visitor } from './helpers/trial.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'svc-mail-files-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function memoryLog() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

const emlFiles = async (folder: string) => (await readdir(folder)).filter((n) => n.endsWith('.eml')).sort();

/** The header block of a message, unfolded, as name (lower case) → value. */
function headersOf(raw: string): Map<string, string> {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n')).replace(/\r\n[ \t]+/g, ' ');
  return new Map(
    head.split('\r\n').map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
}

/** RFC 2047 encoded words (Q encoding, UTF-8) decoded. */
function decodeWords(value: string): string {
  return value.replace(/=\?UTF-8\?Q\?([^?]*)\?=/gi, (_m, q: string) =>
    Buffer.from(
      q.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_h, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
      'latin1',
    ).toString('utf8'),
  );
}

/** What a mail client needs of an RFC 5322 message: CRLF lines only, none over 998 octets, the headers, a body. */
function expectMessage(raw: string) {
  expect(raw.replace(/\r\n/g, '')).not.toMatch(/[\r\n]/);
  for (const line of raw.split('\r\n')) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(998);
  const headers = headersOf(raw);
  for (const name of ['from', 'to', 'subject', 'date', 'message-id', 'mime-version', 'content-type'])
    expect(headers.has(name), name).toBe(true);
  expect(Number.isNaN(Date.parse(headers.get('date')!))).toBe(false);
  expect(headers.get('message-id')).toMatch(/^<[^<>@\s]+@[^<>@\s]+>$/);
  expect(headers.get('content-type')).toMatch(/^multipart\/alternative; boundary=/);
  return headers;
}

describe('createMailer without SMTP_URL', () => {
  it('writes one .eml file a mail (0600, in a 0700 folder it makes), the whole message, and logs the folder once', async () => {
    const folder = path.join(dir, 'unit', 'mail');
    const { log, lines } = memoryLog();
    const mailer = createMailer(undefined, 'svc <no-reply@svc.test>', log, folder);
    const sent = [1, 2, 3].map((n) => ({
      to: `customer-${n}@example.com`,
      subject: `Ready ${n}: Grüße`,
      text: `Your password: pw-${n}-secret\n`,
      html: `<p>Your password: pw-${n}-secret</p>`,
      secrets: [`pw-${n}-secret`],
    }));
    for (const message of sent) await mailer.send(message);
    mailer.close();

    const files = await emlFiles(folder);
    expect(files).toHaveLength(3);
    expect(await readdir(folder)).toHaveLength(3); // no temporary file left
    expect((await stat(folder)).mode & 0o777).toBe(0o700);
    const raws = await Promise.all(files.map((f) => readFile(path.join(folder, f), 'utf8')));
    for (const file of files) expect((await stat(path.join(folder, file))).mode & 0o777).toBe(0o600);
    // In the order sent (names sort by time), each the message its recipient gets, secret included.
    const byRecipient = raws.map((raw) => headersOf(raw).get('to'));
    expect(byRecipient).toEqual(sent.map((m) => m.to));
    for (const [i, raw] of raws.entries()) {
      const headers = expectMessage(raw);
      expect(headers.get('from')).toBe('svc <no-reply@svc.test>');
      expect(decodeWords(headers.get('subject')!)).toBe(`Ready ${i + 1}: Grüße`);
      expect(textOf({ to: [], raw })).toBe(`Your password: pw-${i + 1}-secret\r\n`); // CRLF, as on the wire
      expect(raw).toContain('Content-Type: text/html');
    }
    // The folder is said once; no mail text (a password) reaches the log.
    const log_ = lines.join('');
    expect(log_.split(`mails are written as .eml files to ${folder}`)).toHaveLength(2);
    expect(log_).not.toContain('secret');
  });

  it('with SMTP_URL nothing is written to the folder', async () => {
    const folder = path.join(dir, 'smtp-unused');
    const { log, lines } = memoryLog();
    const mailer = createMailer('smtp://127.0.0.1:1', 'svc <no-reply@svc.test>', log, folder);
    mailer.close();
    await expect(stat(folder)).rejects.toThrow();
    expect(lines.join('')).not.toContain('.eml');
  });
});

describe('the service without SMTP_URL', () => {
  const t = useTestApp({ env: () => ({ MAIL_DIR: path.join(dir, 'service-mail') }) });

  it("a visitor's code mail is a file in MAIL_DIR, and the code in it is the one the form accepts", async () => {
    const pkg = await createTrialPackage(t.ctx);
    const v = new Visitor(injectTransport(t.app));
    const page = await v.submit('visitor@example.com', pkg.id);
    expect(page.status, page.html).toBe(200);
    const folder = path.join(dir, 'service-mail');
    const files = await emlFiles(folder);
    expect(files).toHaveLength(1);
    const raw = await readFile(path.join(folder, files[0]!), 'utf8');
    const headers = expectMessage(raw);
    expect(headers.get('to')).toBe('visitor@example.com');
    const mail: ReceivedMail = { to: ['visitor@example.com'], raw };
    const verified = await v.verify(page.token!, codeFrom(mail));
    expect(verified.status, verified.html).toBe(200);
    expect(verified.html).toContain('Your e-mail address is confirmed');
    expect(t.ctx.logText()).toContain(`mails are written as .eml files to ${folder}`);
  });
});
