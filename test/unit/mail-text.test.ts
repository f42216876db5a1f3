// The plain-text part of a mail is laid out as its template is written: a line per line (Eta's
// default trims the newline after every tag, which put Login and Password on one line).
import { describe, expect, it } from 'vitest';
import { renderMail } from '../../src/core/mail.js';

describe('the text part of a mail', () => {
  it('keeps the lines of its template: login and password each on their own line', () => {
    const { text } = renderMail('ready', {
      name: 'Ann',
      subscriptionName: 'Acme',
      url: 'https://acme.odoo.test',
      login: 'ann@example.test',
      password: 'pw-123',
      brand: 'svc',
    });
    expect(text).toContain('\n    Login:    ann@example.test\n    Password: pw-123\n');
    expect(text).toContain('Open it here:\n\n    https://acme.odoo.test\n');
  });
});
