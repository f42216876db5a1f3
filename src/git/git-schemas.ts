// The git resources as the API shows and accepts them (zod: the output whitelist and the input rules).
import { z } from 'zod';
import { patchOf, refId, timestamp } from '../core/http/schemas.js';
import { headerSecret } from '../core/outbound-fields.js';
import { GitProvider, GitRepositoryState } from '../generated/prisma/enums.js';

export const gitAccount = z.object({
  id: z.number(),
  name: z.string().nullable(),
  access_token_set: z.boolean(),
  git_provider: z.enum(GitProvider),
  user_id: z.number(),
  created_at: timestamp,
  updated_at: timestamp,
});
const accountFields = {
  name: z.string().max(200).nullable(),
  access_token: headerSecret(z.string().trim().min(1).max(1000)).describe('Write-only personal access token of the git host'),
  git_provider: z.enum(GitProvider),
  user_id: refId.describe('Owning user; default: the caller'),
};
export const gitAccountCreate = z
  .object(accountFields)
  .partial({ name: true, git_provider: true, user_id: true })
  .strict()
  .meta({ example: { name: 'github', access_token: 'ghp_exampletoken' } });
export const gitAccountUpdate = patchOf(z.object(accountFields), { access_token: 'ghp_newtoken' });

export const gitRepository = z.object({
  id: z.number(),
  name: z.string(),
  branch_name: z.string(),
  git_account_id: z.number(),
  root_server_id: z.number().nullable(),
  deploy_path: z.string().describe('Where push_commit deploys (default <ODOO_BASE_PATH>/custom-addons/<repo>)'),
  state: z.enum(GitRepositoryState),
  webhook_id: z.string().nullable(),
  webhook_url: z.string().nullable().describe('The inbound URL registered at the git host'),
  last_commit_id: z.number().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
const repositoryFields = {
  name: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'must be owner/repo')
    .refine((v) => !v.split('/').some((part) => part === '.' || part === '..'), 'must be owner/repo'),
  // A branch name as git allows it, and nothing a shell or a URL would read differently. The rules
  // beyond the characters are checked apart, so that schema tools can make examples of the pattern.
  branch_name: z
    .string()
    .trim()
    .min(1)
    .max(250)
    .regex(/^[A-Za-z0-9._/-]+$/, 'must be a valid branch name')
    .refine((v) => !v.startsWith('-') && !v.includes('..') && !v.includes('//') && !/[./]$/.test(v), 'must be a valid branch name'),
  git_account_id: refId,
  root_server_id: refId.nullable(),
  deploy_path: z
    .string()
    .regex(/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/, 'an absolute path (letters, digits and . _ - / only)')
    .refine((v) => !v.split('/').includes('..') && v !== '/', 'must not contain .. or be /')
    .nullable()
    .describe('Default <ODOO_BASE_PATH>/custom-addons/<repo>; the live path becomes a symlink to the current release'),
};
export const gitRepositoryCreate = z
  .object(repositoryFields)
  .partial({ root_server_id: true, deploy_path: true })
  .strict()
  .meta({ example: { name: 'acme/odoo-addons', branch_name: 'main', git_account_id: 1, root_server_id: 1 } });
export const gitRepositoryUpdate = patchOf(z.object(repositoryFields), { branch_name: 'release' });

export const gitCommit = z.object({
  id: z.number(),
  commit_id: z.string(),
  commit_message: z.string(),
  commit_by: z.string(),
  branch: z.string(),
  repository_id: z.number(),
  created_at: timestamp,
});

export type GitRepositoryOut = z.infer<typeof gitRepository>;
