// Connecting to a root server with its stored credentials (src/core/ssh.ts is the client): the
// record's secrets decrypted, its sudo mode, and trust on first use of its host key.
import type { Db } from '../core/db.js';
import type { SecretBox } from '../core/crypto.js';
import type { RootServer } from '../generated/prisma/client.js';
import { connectSsh, type ConnectOptions, type SshConnection, type SshTarget } from '../core/ssh.js';
import { hostKeyChanged } from '../core/ssh-error.js';

/** The fields of a root server record that connecting needs (secrets as stored, encrypted). */
export interface RootServerSshRecord {
  id: number;
  ip: string;
  port: number;
  username: string;
  password: string | null;
  key: string | null;
  sudo_user: boolean;
  sudo_user_no_password: boolean;
  host_key: string | null;
}

export async function sshTargetOf(secretBox: SecretBox, server: RootServerSshRecord): Promise<SshTarget> {
  return {
    host: server.ip,
    port: server.port,
    username: server.username,
    password: await secretBox.reveal(server.password),
    privateKey: await secretBox.reveal(server.key),
    // root needs no sudo.
    sudo: !server.sudo_user || server.username === 'root' ? 'none' : server.sudo_user_no_password ? 'nopasswd' : 'password',
    knownHostKey: server.host_key,
  };
}

/** The server's secrets in clear, to mask wherever text from or about it is stored. */
export async function secretsOfServer(
  secretBox: SecretBox,
  server: Pick<RootServer, 'password' | 'key' | 'code_server_password' | 'odoo_db_password' | 'odoo_admin_passwd' | 'odoo_host_secret'>,
): Promise<string[]> {
  const stored = [
    server.password,
    server.key,
    server.code_server_password,
    server.odoo_db_password,
    server.odoo_admin_passwd,
    server.odoo_host_secret,
  ];
  const values = await Promise.all(stored.map((v) => secretBox.reveal(v)));
  return values.filter((v): v is string => !!v);
}

/**
 * Connects to a root server with its stored credentials. The first connection records the host
 * key (trust on first use); later ones refuse a different key.
 */
export async function connectRootServer(
  deps: { db: Db; secretBox: SecretBox },
  server: RootServerSshRecord,
  opts: ConnectOptions = {},
  /** The target, when the caller has it already (its secrets are decrypted once). */
  known?: SshTarget,
): Promise<SshConnection> {
  const target = known ?? (await sshTargetOf(deps.secretBox, server));
  const conn = await connectSsh(target, opts);
  if (server.host_key === null) {
    // Recorded only while the row still points where this connection went (a move meanwhile
    // resets host_key, and the key of the old host must not be recorded for the new one).
    const { count } = await deps.db.rootServer.updateMany({
      where: { id: server.id, host_key: null, ip: server.ip, port: server.port, username: server.username },
      data: { host_key: conn.hostKey },
    });
    if (count === 0) {
      // Another connection recorded a key meanwhile: it must be this one.
      const stored = await deps.db.rootServer.findUnique({ where: { id: server.id }, select: { host_key: true } });
      if (stored?.host_key && stored.host_key !== conn.hostKey) {
        conn.close();
        throw hostKeyChanged({ ...target, knownHostKey: stored.host_key }, conn.hostKey);
      }
    }
  }
  return conn;
}
