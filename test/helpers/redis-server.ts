// A private Redis server for one test file, keeping nothing on disk (as the service's Redis is
// run): restart() kills it and starts it again empty on the same port, a Redis that lost its data.
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './sshd.js';

export interface RedisServer {
  url: string;
  /** kill -9, then the same port again with an empty data set. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let child = await launch(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart() {
      await kill(child);
      child = await launch(port);
    },
    stop: () => kill(child),
  };
}

/** Resolves once the server says it accepts connections. */
function launch(port: number): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', '/tmp'];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${text}`)), 20_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${text}`));
    });
  });
}

async function kill(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}
