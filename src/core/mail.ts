// Outgoing mail over SMTP (nodemailer). Without SMTP_URL each mail is written to MAIL_DIR as an
// .eml file: the message nodemailer would have sent (RFC 5322, CRLF lines), which a mail client
// opens, so a first trial works without a relay. Mails are eta templates in views/mail/: a
// plain-text and an HTML part each.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';

// autoTrim off: a text part is laid out line by line as written (Eta's default drops the newline after each tag).
const eta = new Eta({ views: path.resolve(fileURLToPath(new URL('../../views', import.meta.url))), cache: true, autoTrim: false });

/** The text and HTML parts of the mail `name` (views/mail/<name>_text.eta and <name>_html.eta). */
export function renderMail(name: string, data: object): { text: string; html: string } {
  return { text: eta.render(`mail/${name}_text`, data), html: eta.render(`mail/${name}_html`, data) };
}

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** Values told only to the recipient (a password): never in a log line or a copy kept elsewhere. */
  secrets?: readonly string[];
}

/** The mail's text with its secrets replaced, for every copy but the one sent. */
export function textWithoutSecrets(message: Pick<MailMessage, 'text' | 'secrets'>): string {
  return (message.secrets ?? []).reduce((text, secret) => (secret ? text.replaceAll(secret, '********') : text), message.text);
}

export interface Mailer {
  /** Sends at once; rejects when the SMTP server refuses or cannot be reached. */
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/** `<UTC time>-<random>.eml`: names sort in the order the mails were written, and never collide. */
function emlName(): string {
  return `${new Date().toISOString().replace(/[-:]/g, '').replace('.', '-')}-${randomBytes(4).toString('hex')}.eml`;
}

/**
 * Mails as files in `dir` (made 0700 when missing: a mail may carry a password), one `.eml` a mail,
 * 0600, written under a temporary name and then renamed (a reader never sees half a mail). The
 * folder is logged once, when the mailer is made.
 */
function fileMailer(dir: string, from: string, log: Logger): Mailer {
  const folder = path.resolve(dir);
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'windows' });
  let ready = false;
  log.info({ mail_dir: folder }, `SMTP_URL unset: mails are written as .eml files to ${folder}`);
  return {
    async send(message) {
      const { secrets: _, ...mail } = message;
      const info = (await transport.sendMail({ from, ...mail })) as { message: Buffer };
      if (!ready) {
        mkdirSync(folder, { recursive: true, mode: 0o700 });
        ready = true;
      }
      const file = path.join(folder, emlName());
      await writeFile(`${file}.tmp`, info.message, { mode: 0o600 });
      await rename(`${file}.tmp`, file);
      log.debug({ to: message.to, subject: message.subject, file }, 'mail written');
    },
    close() {
      transport.close();
    },
  };
}

/** SMTP when `smtpUrl` is set, else .eml files in `mailDir`. */
export function createMailer(smtpUrl: string | undefined, from: string, log: Logger, mailDir = './data/mail'): Mailer {
  if (!smtpUrl) return fileMailer(mailDir, from, log);
  const transport = nodemailer.createTransport(smtpUrl, {
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
    pool: true,
  } as object);
  return {
    async send(message) {
      const { secrets: _, ...mail } = message;
      await transport.sendMail({ from, ...mail });
    },
    close() {
      transport.close();
    },
  };
}
