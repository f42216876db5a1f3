// The values of the Odoo feature that end up in a shell command or in Odoo's configuration file on a
// host: each is checked here, against a pattern that cannot hold a quote, a space, a line break or
// a shell metacharacter, before anything runs (400 on the request).
import { z } from 'zod';

/** An Odoo version's name names its directory on the hosts: <ODOO_BASE_PATH>/versions/<name>. */
export const versionName = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9.-]*$/, 'letters, digits, . and - only (and not starting with . or -)')
  .refine((v) => !v.includes('..'), 'must not contain ..');

/** A Debian package name (Debian policy §5.6.1). */
export const osPackage = z
  .string()
  .trim()
  .regex(/^[a-z0-9][a-z0-9.+-]+$/, 'a Debian package name: lower-case letters, digits, . + - (at least two characters)')
  .max(100);

/**
 * The one rule of an Odoo module's technical name (its directory in an addons path, imported as
 * odoo.addons.<name>): lower-case letters, digits and _, as Odoo's and OCA's modules are named, at
 * most 100. Odoo itself checks none (any directory with a manifest is a module); this keeps every
 * name svc puts on a command line or in a configuration free of anything a shell would read. Names
 * given through the API and names read from a host's directories (a rollout's modules) are checked
 * by it alike.
 */
const MODULE_NAME = /^[a-z0-9][a-z0-9_]{0,99}$/;

export const isModuleName = (name: string) => MODULE_NAME.test(name);

/** An Odoo module's technical name (its directory in an addons path). */
export const moduleName = z.string().trim().regex(MODULE_NAME, 'a module name: lower-case letters, digits and _ (at most 100)');

/** The checksum of an Odoo source tarball. */
export const sha256 = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex (64 characters)');

/**
 * Where the source comes from: an https URL the service downloads (through its outbound rules), or a
 * file on the host itself. Neither may hold characters a shell or the action log would read
 * otherwise (quotes, spaces, backslashes, control characters).
 */
export const sourceUrl = z
  .string()
  .trim()
  .max(2000)
  .refine((v) => !/[\s'"`\\$;&|<>(){}\p{Cc}]/u.test(v), 'must not contain spaces, quotes, backslashes or shell characters')
  .refine((v) => {
    if (v.startsWith('file:///')) return /^file:\/\/\/[A-Za-z0-9._/+-]+$/.test(v) && !v.split('/').includes('..');
    if (!URL.canParse(v)) return false;
    const url = new URL(v);
    return url.protocol === 'https:' && url.username === '' && url.password === '';
  }, 'an https:// URL (no credentials in it) or a file:///path on the host (letters, digits, . _ / + - only)');

/**
 * Odoo's dbfilter: a regular expression, with %h (the request's host) and %d (its first label).
 * Written into the configuration file as one line: no line break, no quote, no space.
 */
export const dbfilter = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_.^$%|()[\]*+?{},-]+$/, 'a regular expression of letters, digits and _ . ^ $ % | ( ) [ ] * + ? { } , - only')
  .refine((v) => {
    try {
      new RegExp(v.replaceAll('%h', 'host').replaceAll('%d', 'db'));
      return true;
    } catch {
      return false;
    }
  }, 'must be a valid regular expression');

/** A TCP port Odoo may listen on (not a privileged one: Odoo runs as its own user). */
export const httpPort = z.number().int().min(1024).max(65_000);

/**
 * What Odoo 18.0's Python needs from Debian 12 (Python 3.11), run as /usr/bin/python3.
 */
export const DEFAULT_OS_PACKAGES = [
  'python3-asn1crypto',
  'python3-babel',
  'python3-cbor2',
  'python3-chardet',
  'python3-cryptography',
  'python3-decorator',
  'python3-docutils',
  'python3-freezegun',
  'python3-geoip2',
  'python3-gevent',
  'python3-greenlet',
  'python3-idna',
  'python3-jinja2',
  'python3-libsass',
  'python3-lxml',
  'python3-markupsafe',
  'python3-num2words',
  'python3-ofxparse',
  'python3-openpyxl',
  'python3-passlib',
  'python3-pil',
  'python3-polib',
  'python3-psutil',
  'python3-psycopg2',
  'python3-openssl',
  'python3-pypdf2',
  'python3-serial',
  'python3-dateutil',
  'python3-ldap',
  'python3-stdnum',
  'python3-tz',
  'python3-usb',
  'python3-qrcode',
  'python3-reportlab',
  'python3-requests',
  'python3-rjsmin',
  'python3-urllib3',
  'python3-typing-extensions',
  'python3-vobject',
  'python3-werkzeug',
  'python3-xlrd',
  'python3-xlsxwriter',
  'python3-xlwt',
  'python3-zeep',
] as const;

export const DEFAULT_SERVER_WIDE_MODULES = ['base', 'web'] as const;

/**
 * setup_odoo makes the base path mode 755 and puts versions/, config/, data/ and logs/ in it: on a
 * directory of the system itself that drops /tmp's sticky bit, opens /root to every user, or
 * scatters Odoo's directories in /etc or /var. So a base path is never one of these; nor inside
 * the ones that hold no lasting data of their own (virtual, in memory, the boot partition).
 */
const SYSTEM_DIRECTORIES = new Set([
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/media',
  '/mnt',
  '/opt',
  '/proc',
  '/root',
  '/run',
  '/sbin',
  '/srv',
  '/sys',
  '/tmp',
  '/usr',
  '/usr/local',
  '/var',
  '/var/lib',
  '/var/log',
  '/var/tmp',
]);
const NOTHING_LASTS_INSIDE = ['/boot', '/dev', '/proc', '/run', '/sys'];
const isSystemDirectory = (path: string) => SYSTEM_DIRECTORIES.has(path) || NOTHING_LASTS_INSIDE.some((dir) => path.startsWith(`${dir}/`));

/** Where Odoo lives on a host (its versions, configuration, data and logs): an absolute path. */
export const basePath = z
  .string()
  .max(200)
  .regex(/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/, 'an absolute path (letters, digits and . _ - / only)')
  .refine((v) => !v.split('/').includes('..') && !v.includes('//'), 'must not contain .. or //')
  .refine(
    (v) => !isSystemDirectory(v),
    'must not be a system directory such as /tmp, /root, /etc or /var, nor inside /proc, /sys, /dev, /run or /boot',
  );
