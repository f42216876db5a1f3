// Runs the service's own entry points as child processes, as a user would.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

// Vite/Vitest put these into process.env (BASE_URL=/ would be read as the service's BASE_URL).
const VITEST_ENV = ['BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR'];

export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of VITEST_ENV) delete env[name];
  return { ...env, ...extra };
}

/** `tsx <entry> ...args`, synchronously; returns status, stdout and stderr. */
export function runEntry(entry: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], {
    env: childEnv(env),
    encoding: 'utf8',
    timeout: 60_000,
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything the process wrote so far (JSON log lines, errors). */
  output(): string;
  /** `kill -9`: no shutdown, no cleanup, as a crashed machine would. */
  kill9(): Promise<void>;
}

/**
 * `npm start` as a child process with `env` (e.g. SVC_ROLE=worker and a test context's database,
 * Redis prefix and master key); resolves once its log says "svc started".
 */
export async function startService(env: Record<string, string>, timeoutMs = 60_000): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start:\n${text}`)), timeoutMs);
    const read = (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('"msg":"svc started"')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the service exited with ${code}:\n${text}`));
    });
  });
  return {
    child,
    output: () => text,
    async kill9() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
