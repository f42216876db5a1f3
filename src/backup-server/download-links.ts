// A backup's download link: {download_url}/{id}?expires=<unix seconds>&signature=<HMAC>, good until
// it expires. The key is derived from svc's master key for this backup server, so every process of
// it signs and checks the same links and nobody without the master key can make one.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../core/crypto.js';

export function createDownloadLinks(secretBox: Pick<SecretBox, 'deriveKey'>, serverId: number, ttlSeconds: number) {
  const key = secretBox.deriveKey(`backup-server:${serverId}:download-links`);
  const sign = (id: number, expires: number) => createHmac('sha256', key).update(`${id}.${expires}`).digest('base64url');

  return {
    /** The link to backup `id` under the record's download_url. */
    linkTo(downloadUrl: string, id: number, now = Date.now()): string {
      const expires = Math.floor(now / 1000) + ttlSeconds;
      return `${downloadUrl.replace(/\/+$/, '')}/${id}?${new URLSearchParams({ expires: String(expires), signature: sign(id, expires) })}`;
    },

    /** Whether a link's expiry and signature are good for backup `id`. */
    isValid(id: number, expires: string | undefined, signature: string | undefined, now = Date.now()): boolean {
      if (!expires || !signature || !/^\d{1,12}$/.test(expires)) return false;
      if (Number(expires) * 1000 < now) return false;
      const want = Buffer.from(sign(id, Number(expires)));
      const got = Buffer.from(signature);
      return want.length === got.length && timingSafeEqual(want, got);
    },
  };
}
