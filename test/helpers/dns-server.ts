// A tiny authoritative DNS server over UDP (node:dgram) standing in for 1.1.1.1 / 8.8.8.8: it
// answers A queries from its zone, AAAA with no records, unknown names with NXDOMAIN, names in
// `silent` not at all, and records every question it receives.
import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';

export interface DnsServer {
  address: string; // "127.0.0.1:port"
  queries: { name: string; type: number }[];
  close(): Promise<void>;
}

const TYPE_A = 1;

function readName(msg: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let at = offset;
  while (msg[at]! !== 0) {
    const len = msg[at]!;
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('ascii'));
    at += len + 1;
  }
  return { name: labels.join('.').toLowerCase(), end: at + 1 };
}

export async function startDnsServer(zone: Record<string, string[]>, silent: string[] = []): Promise<DnsServer> {
  const socket = createSocket('udp4');
  const queries: DnsServer['queries'] = [];
  socket.on('message', (msg, peer) => {
    const { name, end } = readName(msg, 12);
    const type = msg.readUInt16BE(end);
    queries.push({ name, type });
    if (silent.includes(name)) return;
    const question = msg.subarray(12, end + 4);
    const known = Object.hasOwn(zone, name);
    const answers = known && type === TYPE_A ? zone[name]! : [];
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0); // id
    header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // response, RD, RA; rcode NXDOMAIN when unknown
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const records = answers.map((ip) => {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
      rr.writeUInt16BE(TYPE_A, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6); // TTL
      rr.writeUInt16BE(4, 10);
      for (const [i, octet] of ip.split('.').entries()) rr.writeUInt8(Number(octet), 12 + i);
      return rr;
    });
    socket.send(Buffer.concat([header, question, ...records]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
