// The tarball on its way to the root server: passed through unchanged while a copy is inflated
// here only to count what it unpacks to, so a small download that unpacks to gigabytes (a gzip
// bomb) stops before it fills the server's disk, and a corrupt or cut-off gzip stream fails here
// before the server sees the end of its input.
import { Transform, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { UserError } from '../core/errors.js';
import { OutboundError } from '../core/outbound-http.js';

export function limitUnpacked(source: Readable, maxBytes: number, what: string): Transform {
  const gunzip = createGunzip();
  let unpacked = 0;
  const checked = new Transform({
    transform(chunk: Buffer, _enc, done) {
      // Forwarded once the copy is inflated: the check keeps pace with the transfer.
      gunzip.write(chunk, () => done(null, chunk));
    },
    flush(done) {
      gunzip.once('end', () => done());
      gunzip.end();
      gunzip.resume();
    },
    destroy(err, done) {
      gunzip.destroy();
      if (!source.readableEnded) source.destroy(err ?? undefined); // stops the download, saying why
      done(err);
    },
  });
  gunzip.on('data', (chunk: Buffer) => {
    unpacked += chunk.length;
    if (unpacked > maxBytes) checked.destroy(new UserError(`${what} unpacks to more than ${maxBytes} bytes (GIT_DEPLOY_MAX_BYTES)`));
  });
  gunzip.on('error', (err) => checked.destroy(new UserError(`${what} is not a valid .tar.gz: ${err.message}`)));
  source.on('error', (err) => {
    const tooLarge = err instanceof OutboundError && err.reason === 'too_large';
    checked.destroy(
      new UserError(tooLarge ? `${what} is larger than ${maxBytes} bytes (GIT_DEPLOY_MAX_BYTES)` : `${what}: ${err.message}`),
    );
  });
  // Data flows (and may fail) before the consumer attaches: a failure meanwhile stays in
  // `checked.errored`, which ssh exec checks before it runs anything, instead of going uncaught.
  checked.on('error', () => {});
  source.pipe(checked);
  return checked;
}
