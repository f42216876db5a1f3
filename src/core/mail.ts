// Outgoing mail over SMTP (nodemailer). Without SMTP_URL mail goes to the log only (development).
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
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
        log.warn({ to: message.to, subject: message.subject, text: message.text }, 'SMTP_URL unset: mail logged, not sent');
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
      await transport.sendMail({ from, ...message });
    },
    close() {
      transport.close();
    },
  };
}
