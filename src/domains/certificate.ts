// The certificate the Odoo host serves for a customer domain, read the way a browser meets it: a
// TLS connection to the host's address on 443 with the host name as SNI. The service does not
// judge the chain (a private ACME server's root is no public one); it checks that the certificate
// is for this name and valid now, and records its expiry and issuer.
import { checkServerIdentity, connect, type PeerCertificate } from 'node:tls';

const HTTPS_PORT = 443;

export interface ServedCertificate {
  not_after: Date;
  issuer: string;
}

/** "CN=R11, O=Let's Encrypt, C=US" from the issuer's fields. */
function issuerOf(cert: PeerCertificate): string {
  return Object.entries(cert.issuer ?? {})
    .reverse()
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('+') : v}`)
    .join(', ');
}

/** The certificate served for `hostname` at `address`, or an error saying why there is none. */
export function readCertificate(
  address: string,
  hostname: string,
  timeoutMs: number,
  port = HTTPS_PORT,
): Promise<ServedCertificate | { error: string }> {
  return new Promise((resolve) => {
    const where = `${address}:${port}`;
    const socket = connect({ host: address, port, servername: hostname, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
    const done = (result: ServedCertificate | { error: string }) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done({ error: `no TLS answer from ${where} within ${timeoutMs} ms` }));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      done({ error: `TLS connection to ${where} for ${hostname} failed: ${err.code ?? ''} ${err.message}`.replace(/\s+/g, ' ') }),
    );
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      if (!cert?.valid_to) return done({ error: `${where} presented no certificate for ${hostname}` });
      const mismatch = checkServerIdentity(hostname, cert);
      if (mismatch) return done({ error: `${where} presented a certificate that is not for ${hostname} (${cert.subject?.CN ?? 'no CN'})` });
      const notBefore = new Date(cert.valid_from);
      const notAfter = new Date(cert.valid_to);
      const now = Date.now();
      if (notBefore.getTime() > now || notAfter.getTime() < now) {
        return done({
          error: `the certificate ${where} presents for ${hostname} is not valid now (${cert.valid_from} – ${cert.valid_to})`,
        });
      }
      done({ not_after: notAfter, issuer: issuerOf(cert) });
    });
  });
}
