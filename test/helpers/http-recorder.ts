// A local HTTP server standing in for a third-party API: it answers with the test's handler and
// records every request it receives (method, path, query, headers, body) for assertions.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body as received (binary-safe). */
  raw: Buffer;
}

export type Handler = (req: RecordedRequest, res: ServerResponse) => unknown;

export interface RecordingServer {
  url: string;
  port: number;
  calls: RecordedRequest[];
  /** Calls whose path is `path` (query ignored). */
  callsTo(path: string): RecordedRequest[];
  close(): Promise<void>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export async function startRecordingServer(handler: Handler): Promise<RecordingServer> {
  const calls: RecordedRequest[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://local');
    const raw = Buffer.concat(chunks);
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: raw.toString('utf8'),
      raw,
    };
    calls.push(recorded);
    try {
      await handler(recorded, res);
    } catch (err) {
      if (!res.headersSent) sendJson(res, 500, { error: String(err) });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    callsTo: (path) => calls.filter((c) => c.path === path),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
