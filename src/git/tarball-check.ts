// The tarball on its way to the root server: passed through unchanged while a copy is inflated
// here to check it. It counts what the tarball unpacks to, so a small download that unpacks to
// gigabytes (a gzip bomb) stops before it fills the server's disk; it reads every tar header
// (tar-entries.ts), so an entry that would land outside the release directory is refused before
// the server receives a byte of it; and a corrupt or cut-off gzip stream fails here before the
// server sees the end of its input.
import { Transform, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { UserError } from '../core/errors.js';
import { OutboundError } from '../core/outbound-error.js';
import { createTarEntryCheck } from './tar-entries.js';

export function checkTarball(source: Readable, maxBytes: number, what: string): Transform {
  const gunzip = createGunzip();
  const checkEntries = createTarEntryCheck(what);
  let unpacked = 0;
  const checked = new Transform({
    transform(chunk: Buffer, _enc, done) {
      // zlib pushes all it inflates from a chunk before calling back, and inflate gives out all
      // it can: once the copy is read here, every byte the server could inflate from this chunk
      // has been checked. Only then does the chunk go on.
      gunzip.write(chunk, (err) => {
        inspect();
        if (!err && !checked.destroyed) done(null, chunk); // else the error handler below ends it
      });
    },
    flush(done) {
      gunzip.once('end', () => done());
      gunzip.end();
    },
    destroy(err, done) {
      gunzip.destroy();
      if (!source.readableEnded) source.destroy(err ?? undefined); // stops the download, saying why
      done(err);
    },
  });
  // Paused mode: what is inflated waits in gunzip's buffer until read here ('readable' also drains
  // it when zlib waits for room in the middle of a chunk).
  function inspect() {
    while (!checked.destroyed) {
      const out: Buffer | null = gunzip.read();
      if (out === null) return;
      unpacked += out.length;
      if (unpacked > maxBytes)
        return checked.destroy(new UserError(`${what} unpacks to more than ${maxBytes} bytes (GIT_DEPLOY_MAX_BYTES)`));
      try {
        checkEntries(out);
      } catch (err) {
        return checked.destroy(err as Error);
      }
    }
  }
  gunzip.on('readable', inspect);
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
