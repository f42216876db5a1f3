// A customer domain's host name as the service accepts it: lower-case IDNA ASCII (an IDN is
// converted), an apex or a subdomain with at least two labels, never a wildcard, an IP literal or
// the service's own host. What passes is safe in a file name, a shell word and Caddy's
// configuration: letters, digits, '-' and '.' only.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { ValidationError } from '../core/errors.js';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** What a checked host name is made of; checked again wherever one is written to the host. */
export const HOSTNAME = /^[a-z0-9.-]{1,253}$/;

const refuse = (input: string, why: string) =>
  new ValidationError(`hostname "${input.slice(0, 300)}" ${why}`, [{ field: 'hostname', message: why }]);

/** The host name in the form it is stored, or a ValidationError naming `hostname`. */
export function normalizeHostname(input: string, serviceHost: string): string {
  const raw = input.trim().replace(/\.$/, '');
  if (raw.includes('*')) throw refuse(input, 'is a wildcard: give each host name on its own');
  if (isIP(raw.replace(/^\[|\]$/g, '')) !== 0) throw refuse(input, 'is an IP address, not a host name');
  // Checked before the IDNA conversion, which reads its input as a URL's host: it would cut
  // "a.com/x" to "a.com" and turn "0x7f.1" into 127.0.0.1.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: every ASCII character but these is refused
  if (/[\x00-\x2c\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]/.test(raw)) {
    throw refuse(input, 'may hold only letters, digits, "-" and "."');
  }
  // A numeric last label is no top-level domain: 10.1.2.300 and the like are address-shaped.
  if (/^\d+$/.test(raw.split('.').at(-1)!)) throw refuse(input, 'is an IP address, not a host name');
  const ascii = domainToASCII(raw).toLowerCase();
  if (!ascii) throw refuse(input, 'is not a valid host name');
  if (isIP(ascii) !== 0) throw refuse(input, 'is an IP address, not a host name');
  if (ascii.length > 253) throw refuse(input, 'is longer than 253 characters');
  const labels = ascii.split('.');
  if (!labels.every((l) => LABEL.test(l))) {
    throw refuse(input, 'has an invalid label (1 to 63 letters, digits or "-", not starting or ending with "-")');
  }
  if (labels.length < 2) throw refuse(input, 'must be a fully qualified name (example.com or shop.example.com)');
  if (ascii === serviceHost.toLowerCase()) throw refuse(input, "is the service's own host (BASE_URL)");
  return ascii;
}
