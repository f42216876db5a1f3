// svc's own SSH key (as Coolify has one for the machine it is installed on): an Ed25519 pair in
// svc's data folder, beside the master key, made once. Its private half goes to the root server
// record (encrypted at rest like every credential); its public half is put in the login user's
// authorized_keys only when the operator says --trust-this-machine.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, chown, mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { QuickstartError } from './quickstart-errors.js';

export interface MachineKey {
  file: string;
  privateKey: string;
  /** "ssh-ed25519 AAAA… svc@<host>" */
  publicLine: string;
}

/** The key files: `<folder of SVC_MASTER_KEY_FILE>/ssh/svc_ed25519` and its `.pub`. */
export const machineKeyFile = (masterKeyFile: string) => path.join(path.dirname(path.resolve(masterKeyFile)), 'ssh', 'svc_ed25519');

/** Reads svc's key, making it first when there is none (ssh-keygen, no passphrase, 0600). */
export async function ensureMachineKey(masterKeyFile: string): Promise<MachineKey> {
  const file = machineKeyFile(masterKeyFile);
  if (!existsSync(file)) {
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'svc', '-f', file], { stdio: 'ignore' });
  }
  const privateKey = await readFile(file, 'utf8');
  const publicLine = (await readFile(`${file}.pub`, 'utf8')).trim();
  return { file, privateKey, publicLine };
}

export interface LoginUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** The local account from /etc/passwd, or null. */
export async function localUser(name: string): Promise<LoginUser | null> {
  const passwd = await readFile('/etc/passwd', 'utf8');
  for (const line of passwd.split('\n')) {
    const [user, , uid, gid, , home] = line.split(':');
    if (user === name && home) return { name, uid: Number(uid), gid: Number(gid), home };
  }
  return null;
}

/** The key's type and base64 blob: what makes two authorized_keys lines the same key. */
const keyOf = (line: string) => line.trim().split(/\s+/).slice(0, 2).join(' ');

export async function isAuthorized(file: string, key: MachineKey): Promise<boolean> {
  if (!existsSync(file)) return false;
  const wanted = keyOf(key.publicLine);
  return (await readFile(file, 'utf8')).split('\n').some((line) => keyOf(line.replace(/^.*?(ssh-|ecdsa-)/, '$1')) === wanted);
}

/**
 * Appends svc's public key to `file` (the login user's authorized_keys), making its folder 0700 and
 * the file 0600, the user's, as sshd's StrictModes wants them. Nothing else in the file changes.
 */
export async function authorize(file: string, key: MachineKey, user: LoginUser): Promise<void> {
  const dir = path.dirname(file);
  const fresh = !existsSync(dir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (fresh) await chown(dir, user.uid, user.gid);
  const before = existsSync(file) ? await readFile(file, 'utf8') : '';
  const sep = before === '' || before.endsWith('\n') ? '' : '\n';
  await appendFile(file, `${sep}${key.publicLine}\n`, { mode: 0o600 });
  const st = await stat(file);
  if (st.uid !== user.uid) await chown(file, user.uid, user.gid);
  if (!(await isAuthorized(file, key))) throw new QuickstartError(`Could not add svc's key to ${file}`);
}
