// postinstall: generates the Prisma client into src/generated. The Prisma CLI wants a native
// schema engine it cannot download offline; `generate` never runs it, so any executable will do
// (DESIGN §1). Migrations use the WebAssembly engine instead (src/core/migrate.ts).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const cli = require.resolve('prisma/build/index.js');
const env = { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath };
const result = spawnSync(process.execPath, [cli, 'generate'], { stdio: 'inherit', env });
process.exit(result.status ?? 1);
