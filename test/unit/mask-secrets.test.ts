// Masking secrets in text that came from elsewhere (src/core/action-log.ts), on plain strings: whole
// values only, never inside a longer word, nothing for secrets too short to tell from ordinary
// text, and text PostgreSQL can store (no NUL). Needs no service.
import { describe, expect, it } from 'vitest';
import { MASK, maskSecrets, MIN_MASKED_LENGTH, storableText } from '../../src/core/action-log.js';

describe('maskSecrets', () => {
  it('masks a secret wherever it stands as a whole value', () => {
    const text = 'hunter22\npw=hunter22; "hunter22" user:hunter22@host (hunter22)\nhunter22';
    expect(maskSecrets(text, ['hunter22'])).toBe(text.replaceAll('hunter22', MASK));
  });

  it('leaves it alone inside a longer word: letters, digits or _ on the side where the secret has one', () => {
    const text = 'xhunter22 hunter22x hunter22_1 _hunter22 éhunter22 hunter229';
    expect(maskSecrets(text, ['hunter22'])).toBe(text);
    expect(maskSecrets('hunter22-prod', ['hunter22'])).toBe(`${MASK}-prod`);
  });

  it('an edge of the secret that is not a word character needs no boundary', () => {
    expect(maskSecrets('x!pa$$y and !pa$$', ['!pa$$'])).toBe(`x${MASK}y and ${MASK}`);
    expect(maskSecrets('x-tail', ['-tail'])).toBe(`x${MASK}`);
  });

  it('masks the JSON-escaped form by the same rule, and takes regular expression characters literally', () => {
    const secret = 'pa"ss\\word';
    expect(maskSecrets(`{"password":${JSON.stringify(secret)}} ${secret}`, [secret])).toBe(`{"password":"${MASK}"} ${MASK}`);
    expect(maskSecrets('a.b*c(d) aXb*c(d)', ['a.b*c(d)'])).toBe(`${MASK} aXb*c(d)`);
  });

  it(`does not mask secrets shorter than ${MIN_MASKED_LENGTH} characters: "k" leaves "loopback" and "k" as they are`, () => {
    expect(MIN_MASKED_LENGTH).toBe(4);
    expect(maskSecrets('loopback k abc', ['k', 'abc', '', null, undefined])).toBe('loopback k abc');
    expect(maskSecrets('abcd', ['abcd'])).toBe(MASK);
  });

  it('a secret holding another is masked whole', () => {
    expect(maskSecrets('hunter22 hunter', ['hunter', 'hunter22'])).toBe(`${MASK} ${MASK}`);
  });

  it('masks a multi-line private key', () => {
    const key = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n';
    expect(maskSecrets(`cat id:\n${key}done`, [key])).toBe(`cat id:\n${MASK}done`);
  });

  it('makes the text storable: NUL becomes U+FFFD', () => {
    expect(maskSecrets('a\0b hunter22\0', ['hunter22'])).toBe(`a\uFFFDb ${MASK}\uFFFD`);
  });
});

describe('storableText', () => {
  it('replaces NUL, which PostgreSQL text cannot hold, with U+FFFD (as undecodable bytes already are)', () => {
    expect(storableText('a\0b\0')).toBe('a\uFFFDb\uFFFD');
    expect(storableText(Buffer.from([0x61, 0xff, 0x00]).toString('utf8'))).toBe('a\uFFFD\uFFFD');
  });

  it('cuts very long text, saying how much is gone', () => {
    const out = storableText('x'.repeat(256 * 1024 + 10));
    expect(out).toBe(`${'x'.repeat(256 * 1024)}\n[truncated 10 characters]`);
  });
});
