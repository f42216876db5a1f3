// An S3-compatible stand-in on loopback for the backup server's cloud accounts: what restic's
// S3 client (minio-go) asks of a bucket, path-style over plain HTTP. It checks each request's
// Signature Version 4 (the canonical request, and the access key of its credential scope), so a
// wrong access key (InvalidAccessKeyId) or secret (SignatureDoesNotMatch) is refused with 403 as
// S3 refuses it; an account can also be made to refuse everything (AccessDenied). Objects are files
// in a temporary directory; minio-go's streamed uploads (aws-chunked, over HTTP) are decoded.
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface S3Server {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  port: number;
  /** The keys of a bucket's objects. */
  keys(bucket: string): Promise<string[]>;
  /** Every request refused with 403 AccessDenied (an account whose access was withdrawn) while on. */
  refuse(on: boolean): void;
  /** Requests seen so far ("METHOD /path?query" and the answer's status). */
  requests(): { line: string; status: number }[];
  stop(): Promise<void>;
}

export interface S3ServerOptions {
  /** access key id → secret access key */
  accounts: Record<string, string>;
  region?: string;
}

const XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/** Go's url.QueryEscape, then '+' as %20: how minio-go's signer encodes the canonical query. */
const queryEscape = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The body of a minio-go streamed upload: "<hex size>;chunk-signature=<sig>\r\n<data>\r\n" until size 0. */
function decodeAwsChunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) throw new S3Error(400, 'IncompleteBody', 'a chunk header without its end');
    const size = Number.parseInt(body.subarray(at, eol).toString().split(';')[0]!, 16);
    if (!Number.isFinite(size)) throw new S3Error(400, 'InvalidRequest', 'a chunk size that is not hex');
    if (size === 0) return Buffer.concat(parts);
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

export async function startS3Server(opts: S3ServerOptions): Promise<S3Server> {
  const root = await mkdtemp(path.join(tmpdir(), 'svc-s3-'));
  const region = opts.region ?? 'us-east-1';
  const uploads = new Map<string, { bucket: string; key: string; parts: Map<number, Buffer> }>();
  const seen: { line: string; status: number }[] = [];
  let refusing = false;

  const bucketDir = (bucket: string) => path.join(root, encodeURIComponent(bucket));
  const objectFile = (bucket: string, key: string) => path.join(bucketDir(bucket), encodeURIComponent(key));
  const exists = (p: string) =>
    stat(p).then(
      () => true,
      () => false,
    );
  async function listKeys(bucket: string): Promise<string[]> {
    return (await readdir(bucketDir(bucket))).map((f) => decodeURIComponent(f)).sort();
  }

  /** Signature Version 4 of the Authorization header, as S3 checks it. */
  function authenticate(req: IncomingMessage, url: URL): void {
    const auth = req.headers.authorization ?? '';
    const m =
      /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$/.exec(
        auth,
      );
    if (!m) throw new S3Error(403, 'AccessDenied', 'Anonymous access is refused');
    const [, accessKey, date, scopeRegion, signedHeaders, signature] = m as unknown as string[];
    const secret = opts.accounts[accessKey!];
    if (secret === undefined)
      throw new S3Error(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
    const query = [...url.searchParams.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${queryEscape(k)}=${queryEscape(v)}`)
      .join('&');
    const headers = signedHeaders!
      .split(';')
      .map((h) => {
        const value = h === 'host' ? req.headers.host : req.headers[h];
        return `${h}:${String(Array.isArray(value) ? value.join(',') : (value ?? ''))
          .trim()
          .replace(/\s+/g, ' ')}\n`;
      })
      .join('');
    const rawPath = (req.url ?? '/').split('?')[0]!;
    const canonical = [req.method, rawPath, query, headers, signedHeaders, req.headers['x-amz-content-sha256'] ?? ''].join('\n');
    const scope = `${date}/${scopeRegion}/s3/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', req.headers['x-amz-date'] ?? '', scope, sha256(canonical)].join('\n');
    const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), scopeRegion!), 's3'), 'aws4_request');
    if (hmac(key, toSign).toString('hex') !== signature) {
      throw new S3Error(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.');
    }
    if (refusing) throw new S3Error(403, 'AccessDenied', 'Access Denied');
  }

  async function readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    return String(req.headers['x-amz-content-sha256'] ?? '').startsWith('STREAMING-') ? decodeAwsChunked(body) : body;
  }

  function sendXml(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { 'content-type': 'application/xml' });
    res.end(`<?xml version="1.0" encoding="UTF-8"?>\n${body}`);
  }

  async function list(res: ServerResponse, bucket: string, url: URL): Promise<void> {
    const q = url.searchParams;
    const v2 = q.get('list-type') === '2';
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const maxKeys = Math.min(1000, Number(q.get('max-keys') ?? 1000) || 1000);
    const after = v2
      ? q.get('continuation-token')
        ? Buffer.from(q.get('continuation-token')!, 'base64url').toString()
        : (q.get('start-after') ?? '')
      : (q.get('marker') ?? '');
    const contents: string[] = [];
    const prefixes = new Set<string>();
    let last = '';
    let truncated = false;
    for (const key of await listKeys(bucket)) {
      if (!key.startsWith(prefix) || key <= after) continue;
      if (contents.length + prefixes.size >= maxKeys) {
        truncated = true;
        break;
      }
      const rest = key.slice(prefix.length);
      const cut = delimiter ? rest.indexOf(delimiter) : -1;
      if (cut >= 0) {
        const common = prefix + rest.slice(0, cut + delimiter.length);
        prefixes.add(common);
        last = key;
        continue;
      }
      const st = await stat(objectFile(bucket, key));
      const etag = createHash('md5')
        .update(await readFile(objectFile(bucket, key)))
        .digest('hex');
      contents.push(
        `<Contents><Key>${xml(key)}</Key><LastModified>${st.mtime.toISOString()}</LastModified><ETag>&quot;${etag}&quot;</ETag><Size>${st.size}</Size><StorageClass>STANDARD</StorageClass></Contents>`,
      );
      last = key;
    }
    const next = truncated
      ? v2
        ? `<NextContinuationToken>${Buffer.from(last).toString('base64url')}</NextContinuationToken>`
        : `<NextMarker>${xml(last)}</NextMarker>`
      : '';
    sendXml(
      res,
      200,
      `<ListBucketResult xmlns="${XMLNS}"><Name>${xml(bucket)}</Name><Prefix>${xml(prefix)}</Prefix>` +
        `${v2 ? `<KeyCount>${contents.length + prefixes.size}</KeyCount>` : `<Marker>${xml(after)}</Marker>`}` +
        `<MaxKeys>${maxKeys}</MaxKeys><Delimiter>${xml(delimiter)}</Delimiter><IsTruncated>${truncated}</IsTruncated>${next}` +
        `${contents.join('')}${[...prefixes].map((p) => `<CommonPrefixes><Prefix>${xml(p)}</Prefix></CommonPrefixes>`).join('')}</ListBucketResult>`,
    );
  }

  async function putObject(res: ServerResponse, bucket: string, key: string, data: Buffer): Promise<void> {
    await writeFile(objectFile(bucket, key), data);
    res.writeHead(200, { etag: `"${createHash('md5').update(data).digest('hex')}"` });
    res.end();
  }

  async function getObject(req: IncomingMessage, res: ServerResponse, bucket: string, key: string): Promise<void> {
    const file = objectFile(bucket, key);
    if (!(await exists(file))) throw new S3Error(404, 'NoSuchKey', 'The specified key does not exist.');
    const data = await readFile(file);
    const st = await stat(file);
    const headers: Record<string, string> = {
      'content-type': 'application/octet-stream',
      etag: `"${createHash('md5').update(data).digest('hex')}"`,
      'last-modified': st.mtime.toUTCString(),
      'accept-ranges': 'bytes',
    };
    let body = data;
    let status = 200;
    const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''));
    if (range) {
      const start = Number(range[1]);
      const end = range[2] ? Math.min(Number(range[2]), data.length - 1) : data.length - 1;
      if (start >= data.length) throw new S3Error(416, 'InvalidRange', 'The requested range is not satisfiable');
      body = data.subarray(start, end + 1);
      headers['content-range'] = `bytes ${start}-${end}/${data.length}`;
      status = 206;
    }
    headers['content-length'] = String(body.length);
    res.writeHead(status, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://s3.invalid');
    authenticate(req, url);
    const [, bucketPart = '', ...keyParts] = url.pathname.split('/');
    const bucket = decodeURIComponent(bucketPart);
    const key = decodeURIComponent(keyParts.join('/'));
    const q = url.searchParams;
    if (!bucket) throw new S3Error(400, 'InvalidRequest', 'path-style requests only');
    const hasBucket = await exists(bucketDir(bucket));
    if (!key) {
      if (req.method === 'PUT') {
        await readBody(req);
        if (hasBucket) throw new S3Error(409, 'BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded');
        await mkdir(bucketDir(bucket));
        res.writeHead(200, { location: `/${bucket}` });
        res.end();
        return;
      }
      if (!hasBucket) throw new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist');
      if (req.method === 'HEAD') {
        res.writeHead(200);
        res.end();
      } else if (req.method === 'GET' && q.has('location')) {
        sendXml(res, 200, `<LocationConstraint xmlns="${XMLNS}">${xml(region)}</LocationConstraint>`);
      } else if (req.method === 'GET') {
        await list(res, bucket, url);
      } else {
        throw new S3Error(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
      }
      return;
    }
    if (!hasBucket) throw new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist');
    const uploadId = q.get('uploadId');
    if (req.method === 'POST' && q.has('uploads')) {
      const id = randomUUID();
      uploads.set(id, { bucket, key, parts: new Map() });
      sendXml(
        res,
        200,
        `<InitiateMultipartUploadResult xmlns="${XMLNS}"><Bucket>${xml(bucket)}</Bucket><Key>${xml(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`,
      );
    } else if (uploadId !== null) {
      const upload = uploads.get(uploadId);
      if (!upload || upload.bucket !== bucket || upload.key !== key)
        throw new S3Error(404, 'NoSuchUpload', 'The specified upload does not exist.');
      if (req.method === 'PUT') {
        const data = await readBody(req);
        upload.parts.set(Number(q.get('partNumber')), data);
        res.writeHead(200, { etag: `"${createHash('md5').update(data).digest('hex')}"` });
        res.end();
      } else if (req.method === 'POST') {
        const listed = [...(await readBody(req)).toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((p) => Number(p[1]));
        const data = Buffer.concat(listed.map((n) => upload.parts.get(n) ?? Buffer.alloc(0)));
        uploads.delete(uploadId);
        await writeFile(objectFile(bucket, key), data);
        const etag = `"${createHash('md5').update(data).digest('hex')}-${listed.length}"`;
        sendXml(
          res,
          200,
          `<CompleteMultipartUploadResult xmlns="${XMLNS}"><Bucket>${xml(bucket)}</Bucket><Key>${xml(key)}</Key><ETag>${xml(etag)}</ETag></CompleteMultipartUploadResult>`,
        );
      } else if (req.method === 'DELETE') {
        uploads.delete(uploadId);
        res.writeHead(204);
        res.end();
      } else {
        throw new S3Error(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
      }
    } else if (req.method === 'PUT') {
      await putObject(res, bucket, key, await readBody(req));
    } else if (req.method === 'GET' || req.method === 'HEAD') {
      await getObject(req, res, bucket, key);
    } else if (req.method === 'DELETE') {
      await unlink(objectFile(bucket, key)).catch(() => undefined);
      res.writeHead(204);
      res.end();
    } else {
      throw new S3Error(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
    }
  }

  const server = createServer((req, res) => {
    res.on('finish', () => seen.push({ line: `${req.method} ${req.url}`, status: res.statusCode }));
    handle(req, res).catch((err: Error) => {
      const e = err instanceof S3Error ? err : new S3Error(500, 'InternalError', err.message);
      req.resume();
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (req.method === 'HEAD') {
        res.writeHead(e.status);
        res.end();
        return;
      }
      sendXml(
        res,
        e.status,
        `<Error><Code>${e.code}</Code><Message>${xml(e.message)}</Message><Resource>${xml(req.url ?? '')}</Resource><RequestId>0</RequestId></Error>`,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    keys: listKeys,
    refuse(on) {
      refusing = on;
    },
    requests: () => [...seen],
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
    },
  };
}
