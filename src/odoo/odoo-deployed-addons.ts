// The git deploy paths on a host's addons path (docs/rollouts.md): setup_odoo puts there the deploy
// path of every git repository that deploys to the host and holds a module on it now, after Odoo's
// own directories. A deploy into such a path restarts Odoo gracefully and rolls the change out to
// the host's tenants (src/rollouts). A repository's first deploy comes before its path is there: the
// set-up run after it adds the path.
import type { AppContext } from '../context.js';
import { effectiveDeployPath } from '../git/index.js';
import type { RemoteSession } from '../servers/index.js';
import { addonsDirsAmong } from './odoo-scripts.js';

const STEP_TIMEOUT_MS = 2 * 60_000;

export async function deployedAddons(ctx: Pick<AppContext, 'db' | 'config'>, session: RemoteSession, serverId: number): Promise<string[]> {
  const repos = await ctx.db.gitRepository.findMany({ where: { root_server_id: serverId }, orderBy: { id: 'asc' } });
  const paths = [...new Set(repos.map((r) => effectiveDeployPath(r, ctx.config.ODOO_BASE_PATH)))];
  if (paths.length === 0) return [];
  const res = await session.check(addonsDirsAmong(paths), 'Reading the git deploy paths on the host failed', {
    timeoutMs: STEP_TIMEOUT_MS,
  });
  const found = new Set(
    res.stdout
      .split('\n')
      .filter((x) => x.startsWith('addons='))
      .map((x) => x.slice(7)),
  );
  return paths.filter((p) => found.has(p));
}
