// Outgoing mail over SMTP (nodemailer). Without SMTP_URL mail goes to the log only (development).
// Mails are eta templates in views/mail/: a plain-text and an HTML part each.
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

export function createMailer(smtpUrl: string | undefined, from: string, log: Logger): Mailer {
  if (!smtpUrl) {
    return {
      async send(message) {
        log.warn({ to: message.to, subject: message.subject, text: textWithoutSecrets(message) }, 'SMTP_URL unset: mail logged, not sent');
      },
      close() {},
    };
  }
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
