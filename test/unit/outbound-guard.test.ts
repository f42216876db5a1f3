// The outbound address guard's rules without a network: which addresses it refuses (loopback,
// link-local, unspecified, in any spelling), what OUTBOUND_ALLOW_NETS lets through, its lookup
// hook, and the variable's parsing (a bad CIDR stops start-up naming it).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/core/config.js';
import { BlockedAddressError, createAddressGuard } from '../../src/core/outbound-guard.js';
import { runEntry } from '../helpers/spawn.js';

const REFUSED = [
  ['127.0.0.1', 'loopback'],
  ['127.255.3.4', 'loopback'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  ['169.254.169.254', 'link-local'],
  ['169.254.0.1', 'link-local'],
  ['fe80::1', 'link-local'],
  ['febf::1', 'link-local'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
  ['::ffff:169.254.169.254', 'link-local'],
  ['::ffff:0.0.0.0', 'unspecified'],
] as const;
// Private networks are where backup and push servers live: allowed.
const ALLOWED = ['10.0.0.1', '172.16.5.4', '192.168.1.10', '100.64.0.1', '8.8.8.8', 'fd00::1', '2001:db8::1', '::ffff:10.0.0.1'];

describe('createAddressGuard', () => {
  it('refuses loopback, link-local and unspecified addresses in every spelling, and nothing else', () => {
    const guard = createAddressGuard([]);
    for (const [address, kind] of REFUSED) expect(guard.refusal(address), address).toContain(kind);
    for (const address of ALLOWED) expect(guard.refusal(address), address).toBeNull();
  });

  it('OUTBOUND_ALLOW_NETS lets exactly its networks through, IPv4-mapped forms included', () => {
    const guard = createAddressGuard(['127.0.0.2/32', '::1/128']);
    expect(guard.refusal('127.0.0.2')).toBeNull();
    expect(guard.refusal('::ffff:127.0.0.2')).toBeNull();
    expect(guard.refusal('::1')).toBeNull();
    expect(guard.refusal('127.0.0.1')).toContain('loopback');
    expect(guard.refusal('::ffff:127.0.0.1')).toContain('loopback');
    expect(guard.refusal('169.254.169.254')).toContain('link-local');
  });

  it('checkHost refuses an address written in the URL (the lookup hook never sees those)', () => {
    const guard = createAddressGuard([]);
    for (const host of ['127.0.0.1', '[::1]', '[::ffff:7f00:1]', '0.0.0.0', '169.254.169.254', '[fe80::1]']) {
      expect(() => guard.checkHost(host), host).toThrow(BlockedAddressError);
    }
    expect(() => guard.checkHost('10.1.2.3')).not.toThrow();
    expect(() => guard.checkHost('backup.example.com')).not.toThrow(); // names are checked by the lookup hook
  });

  it('the lookup hook refuses a name that resolves to a refused address, and answers in both callback forms', async () => {
    const lookup = (guard: ReturnType<typeof createAddressGuard>, all: boolean) =>
      new Promise<{ err: Error | null; result: unknown }>((resolve) =>
        guard.lookup('localhost', { all }, (err: Error | null, result: unknown) => resolve({ err, result })),
      );
    const strict = await lookup(createAddressGuard([]), true);
    expect(strict.err).toBeInstanceOf(BlockedAddressError);
    expect(strict.err!.message).toMatch(/^localhost \((127\.0\.0\.1|::1)\) is a loopback address/);

    const open = createAddressGuard(['127.0.0.0/8', '::1/128']);
    const all = await lookup(open, true);
    expect(all.err).toBeNull();
    expect(all.result).toEqual(
      expect.arrayContaining([expect.objectContaining({ address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) })]),
    );
    const one = await lookup(open, false);
    expect(one.err).toBeNull();
    expect(one.result).toMatch(/^(127\.0\.0\.1|::1)$/);
  });
});

describe('OUTBOUND_ALLOW_NETS', () => {
  it('is empty by default; takes CIDRs and single addresses, comma-separated', () => {
    expect(loadConfig({}).OUTBOUND_ALLOW_NETS).toEqual([]);
    expect(loadConfig({ OUTBOUND_ALLOW_NETS: '' }).OUTBOUND_ALLOW_NETS).toEqual([]);
    expect(loadConfig({ OUTBOUND_ALLOW_NETS: '127.0.0.0/8, ::1/128,10.9.8.7,fe80::/10' }).OUTBOUND_ALLOW_NETS).toEqual([
      '127.0.0.0/8',
      '::1/128',
      '10.9.8.7/32',
      'fe80::/10',
    ]);
  });

  it.each(['127.0.0.0/33', '::1/129', 'localhost', '127.0.0.0/8;10.0.0.0/8', '10.0.0/8', '10.0.0.0/-1', '10.0.0.0/'])(
    'refuses %s naming the variable',
    (value) => {
      expect(() => loadConfig({ OUTBOUND_ALLOW_NETS: value })).toThrow(ConfigError);
      expect(() => loadConfig({ OUTBOUND_ALLOW_NETS: value })).toThrow(/\bOUTBOUND_ALLOW_NETS\b/);
    },
  );

  it('a bad value stops npm start with a message naming the variable', () => {
    const result = runEntry('src/main.ts', [], { OUTBOUND_ALLOW_NETS: '127.0.0.0/99' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual(['Invalid configuration:', expect.stringMatching(/^ {2}OUTBOUND_ALLOW_NETS: /)]);
  });
});
