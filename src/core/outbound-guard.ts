// Which addresses outbound HTTP may connect to. Never loopback (the service's own machine and its
// internal ports), link-local (169.254.169.254 is the cloud metadata endpoint) or unspecified
// (0.0.0.0 and :: reach this machine), in any spelling (IPv4-mapped IPv6 included), unless
// OUTBOUND_ALLOW_NETS allows them. Private networks (10/8, 172.16/12, 192.168/16, fc00::/7) are
// allowed: backup and push servers live there. The check sits where the socket gets its address:
// an address written in the URL before connecting, a name in the lookup hook the connection
// resolves it with. So the address checked is the address connected to (no DNS-rebinding window),
// and every redirect hop, being a connection of its own, is checked too.
import { type LookupAddress, lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

const REFUSED = {
  loopback: [
    ['127.0.0.0', 8, 'ipv4'],
    ['::1', 128, 'ipv6'],
  ],
  'link-local': [
    ['169.254.0.0', 16, 'ipv4'],
    ['fe80::', 10, 'ipv6'],
  ],
  // 0.0.0.0/8 is "this network": never a destination, and 0.0.0.0 itself connects to this machine.
  unspecified: [
    ['0.0.0.0', 8, 'ipv4'],
    ['::', 128, 'ipv6'],
  ],
} as const;

const REFUSED_LISTS = Object.entries(REFUSED).map(([kind, nets]) => {
  const list = new BlockList();
  for (const [address, prefix, family] of nets) list.addSubnet(address, prefix, family);
  return [kind, list] as const;
});

/** A connection the guard refused; the outbound client turns it into OutboundError `blocked`. */
export class BlockedAddressError extends Error {
  override name = 'BlockedAddressError';
}

export type AddressGuard = ReturnType<typeof createAddressGuard>;

/** An address as the guard compares it: without a zone, and an IPv4-mapped IPv6 address as IPv4. */
function normalized(address: string): { ip: string; family: 'ipv4' | 'ipv6' } {
  const ip = address.replace(/%.*$/, '');
  if (isIP(ip) !== 6) return { ip, family: 'ipv4' };
  // The URL parser writes every IPv6 spelling one way: ::ffff:127.0.0.1 becomes [::ffff:7f00:1].
  const mapped = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(new URL(`http://[${ip}]`).hostname);
  if (!mapped) return { ip, family: 'ipv6' };
  const [hi, lo] = [Number.parseInt(mapped[1]!, 16), Number.parseInt(mapped[2]!, 16)];
  return { ip: [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.'), family: 'ipv4' };
}

/** `allowNets`: OUTBOUND_ALLOW_NETS, as address/prefix. */
export function createAddressGuard(allowNets: readonly string[]) {
  const allowed = new BlockList();
  for (const net of allowNets) {
    const [address = '', prefix] = net.split('/');
    allowed.addSubnet(address, Number(prefix), isIP(address) === 4 ? 'ipv4' : 'ipv6');
  }

  /** "a loopback address" (…) when the service may not connect to `address`, else null. */
  function refusal(address: string): string | null {
    const { ip, family } = normalized(address);
    const kind = REFUSED_LISTS.find(([, list]) => list.check(ip, family))?.[0];
    if (!kind || allowed.check(ip, family)) return null;
    return `${kind === 'unspecified' ? 'an' : 'a'} ${kind} address`;
  }

  const blocked = (what: string, why: string) =>
    new BlockedAddressError(
      `${what} is ${why}: the service does not call loopback, link-local or unspecified addresses unless OUTBOUND_ALLOW_NETS allows them`,
    );

  return {
    refusal,

    /** Throws BlockedAddressError when a URL's host is a refused address (names go through `lookup`). */
    checkHost(hostname: string): void {
      const ip = hostname.replace(/^\[(.*)\]$/, '$1');
      const why = isIP(ip) ? refusal(ip) : null;
      if (why) throw blocked(ip, why);
    },

    /** The lookup hook of the outbound agents: resolves, then refuses the name if any of its addresses is refused. */
    lookup: ((hostname, options, callback) => {
      dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
        if (err) return callback(err, '', 0);
        for (const { address } of addresses) {
          const why = refusal(address);
          if (why) return callback(blocked(`${hostname} (${address})`, why), '', 0);
        }
        if (options.all) return callback(null, addresses);
        const [first] = addresses;
        callback(null, first?.address ?? '', first?.family ?? 4);
      });
    }) as LookupFunction,
  };
}
