// push_commit as a job: the service downloads the commit's tarball from the git host with the
// account's token and streams it over SSH into deploy-script.ts on the repository's root server,
// which unpacks, validates and switches. The token never leaves the service: the root server (which
// an operator may point anywhere) gets the tree and nothing else. The SSH session writes the script
// and its output to the action log, the download its own api_call row; the outcome goes to the job
// result, one deployment row of the repository's action log and its chatter. A failed validation
// fails the job naming the files.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { JobHandlers } from '../core/jobs.js';
import { featureJobs, type GitDeployEvent, type Registry } from '../feature.js';
import { gitJobs } from './git-job-specs.js';
import { publicJobId } from '../core/queue.js';
import { postMessage } from '../core/chatter.js';
import { writeActionLog } from '../core/action-log.js';
import { checkedResult, loadRootServer, requireConfirmed, openRemoteSession } from '../servers/index.js';
import { DEPLOY_EXIT, deployScript, readDeployOutput } from './deploy-script.js';
import { effectiveDeployPath } from './git-repository-service.js';
import { checkCommitId, createGitHost } from './git-host.js';
import { checkTarball } from './tarball-check.js';

const DEPLOY_TIMEOUT_MS = 15 * 60_000;

function createGitJobHandlers(ctx: AppContext, registry: Registry): JobHandlers<typeof gitJobs> {
  const host = createGitHost(ctx);
  /** Tells the features that follow deploys (a rollout to the host's tenants); a failure there leaves the deploy done. */
  async function tellDeployed(event: GitDeployEvent) {
    for (const observe of registry.gitDeployObservers) {
      try {
        await observe(event);
      } catch (err) {
        await postMessage(ctx.db, {
          model_name: 'svc.saas.git.repository',
          rec_id: event.repository_id,
          body: `Deployed, but what follows a deploy failed: ${(err as Error).message}`,
          message_type: 'notification',
          subtype_xmlid: 'mail.mt_alert',
        });
      }
    }
  }

  return {
    async git_push_commit(payload, job) {
      const jobId = publicJobId(job.queueName, job.id!);
      const repo = await ctx.db.gitRepository.findUnique({ where: { id: payload.repository_id }, include: { git_account: true } });
      const commit = await ctx.db.gitCommit.findUnique({ where: { id: payload.commit_id } });
      if (!repo || !commit) throw new UserError('The repository or the commit no longer exists');
      const sha = commit.commit_id.slice(0, 12);
      const logFields = { model_name: 'svc.saas.git.repository' as const, rec_id: repo.id, user_id: payload.user_id, job_id: jobId };
      const token = await ctx.secretBox.decrypt(repo.git_account.access_token);

      let reported = false;
      async function report(ok: boolean, summary: string, details = '') {
        reported = true;
        await writeActionLog(ctx.db, {
          ...logFields,
          action_type: 'deployment',
          status: ok ? 'success' : 'failure',
          input_text: `push_commit ${commit!.commit_id} (${commit!.branch})`,
          output_text: [summary, details].filter(Boolean).join('\n'),
          secrets: [token],
        });
        await postMessage(ctx.db, {
          model_name: 'svc.saas.git.repository',
          rec_id: repo!.id,
          body: details ? `${summary}\n${details}` : summary,
          message_type: 'notification',
          subtype_xmlid: ok ? 'mail.mt_note' : 'mail.mt_alert',
        });
      }

      try {
        if (!repo.root_server_id) throw new UserError('The repository has no root_server_id');
        const server = await loadRootServer(ctx.db, repo.root_server_id);
        requireConfirmed(server);
        // Checked again here: a commit recorded before ids were checked must not reach the server.
        const commitId = checkCommitId(commit.commit_id, `Recorded commit ${commit.id}`);
        const livePath = effectiveDeployPath(repo, ctx.config.ODOO_BASE_PATH);
        const script = deployScript({ sha: commitId, livePath, seq: job.timestamp });
        await job.updateProgress({ step: 'deploy', commit: commitId, server: server.ip });
        const session = await openRemoteSession(ctx, server, { user_id: payload.user_id, job_id: jobId });
        let res;
        try {
          const limits = { maxBytes: ctx.config.GIT_DEPLOY_MAX_BYTES, timeoutMs: DEPLOY_TIMEOUT_MS };
          const download = await host.tarball(token, repo.name, commitId, logFields, limits);
          const tree = checkTarball(download.body, limits.maxBytes, `The tarball of ${commitId.slice(0, 12)}`);
          try {
            res = await session.run(script, {
              stdin: tree,
              timeoutMs: DEPLOY_TIMEOUT_MS,
              label: `push_commit ${commitId} → ${livePath}\n${script}`,
            });
          } finally {
            await download.logged;
          }
        } finally {
          session.close();
        }
        const out = readDeployOutput(res.stdout);
        if (res.exitCode === DEPLOY_EXIT.invalid && out.report) {
          const files = out.report.invalid.map((f) => `${f.file}: ${f.error}`).join('\n');
          await report(
            false,
            `Deploy of ${sha} refused: ${out.report.invalid.length} file(s) failed validation; ${livePath} is unchanged.`,
            files,
          );
          throw new UserError(`Validation failed, ${livePath} is unchanged:\n${files}`, { invalid: out.report.invalid });
        }
        checkedResult(session, 'The deploy script failed', res, DEPLOY_TIMEOUT_MS);
        if (out.superseded) {
          await report(true, `Deploy of ${sha} skipped: a newer deploy of ${livePath} already happened.`);
          return { deployed: false, superseded: true, commit: commit.commit_id };
        }
        const checked = out.report?.checked ?? { py: 0, xml: 0 };
        await report(true, `Deployed ${sha} to ${server.ip}:${livePath} (${checked.py} Python and ${checked.xml} XML files checked).`);
        await tellDeployed({
          repository_id: repo.id,
          commit_id: commit.id,
          root_server_id: server.id,
          live_path: livePath,
          user_id: payload.user_id,
        });
        return { deployed: true, commit: commit.commit_id, live_path: livePath, release: out.deployedTo, checked };
      } catch (err) {
        if (!reported) await report(false, `Deploy of ${sha} failed: ${(err as Error).message}`);
        throw err;
      }
    },
  };
}

export const gitJobHandlers = featureJobs(gitJobs, createGitJobHandlers, {
  // Not run again after a crash (the release may be half unpacked; the live path is untouched
  // unless the switch happened): the repository's chatter and action log say so.
  git_push_commit: {
    record: (p) => ({ model_name: 'svc.saas.git.repository', rec_id: p.repository_id }),
    action_type: 'deployment',
  },
});
