// Registers the operations of a resource: POST /api/v1/<resource>/{id}/actions/<name>.
// An action is declared, not hand-written: its body and answer schemas, its minimum group, and
// the service call. Quick checks answer 200 with their result; long work answers 202 {job_id}.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { Author } from '../chatter.js';
import type { UserGroup } from '../groups.js';
import { type AuthUser, authorOf } from './auth.js';
import { idParams, jobAccepted } from './schemas.js';

/** What an action's service call gets: the record id, the validated body and the caller. */
export interface ActionInput<B> {
  id: number;
  body: B;
  user: AuthUser;
  author: Author;
}

export interface ActionSpec<B extends z.ZodType | undefined = z.ZodType | undefined, R extends z.ZodType | 'job' = z.ZodType | 'job'> {
  /** A short name for the operation (Postman names its requests after it). */
  summary: string;
  /** What it does, its conditions and its failures. */
  description: string;
  /** Minimum group; default: the resource's. */
  group?: UserGroup;
  /** Its operationId when the derived one (resource.action) is another route's, e.g. an action named `update`. */
  operationId?: string;
  body?: B;
  /** The 200 answer's schema, or 'job': the work is queued and the answer is 202 {job_id}. */
  response: R;
  run(input: ActionInput<B extends z.ZodType ? z.output<B> : undefined>): Promise<R extends z.ZodType ? z.input<R> : string>;
}

/** One action, typed from its own schemas (a helper so each entry of `actions` infers its types). */
export function action<B extends z.ZodType | undefined = undefined, R extends z.ZodType | 'job' = 'job'>(
  spec: ActionSpec<B, R>,
): ActionSpec<B, R> {
  return spec;
}

export interface ActionsOptions {
  /** e.g. '/root-servers' (under /api/v1) */
  path: string;
  tag: string;
  /** Minimum group of every action unless the action says otherwise. */
  group: UserGroup;
  /** The resource is a singleton (settings): no id in the path, and `id` is 1. */
  singleton?: boolean;
  actions: Record<string, ActionSpec>;
}

/** `root-servers` + `run_cmd` → `rootServers.runCmd`: a unique, readable operationId. */
export function operationId(resource: string, name: string): string {
  const camel = (s: string) => s.replace(/[-_/]+(\w)/g, (_m, c: string) => c.toUpperCase()).replace(/^\//, '');
  return `${camel(resource.replace(/^\//, ''))}.${camel(name)}`;
}

export function registerActions(parent: FastifyInstance, o: ActionsOptions) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const base = o.singleton ? `/api/v1${o.path}` : `/api/v1${o.path}/:id`;
  for (const [name, spec] of Object.entries(o.actions)) {
    const job = spec.response === 'job';
    app.post(`${base}/actions/${name}`, {
      config: { group: spec.group ?? o.group },
      schema: {
        tags: [o.tag],
        operationId: spec.operationId ?? operationId(o.path, name),
        summary: spec.summary,
        description: spec.description,
        ...(o.singleton ? {} : { params: idParams }),
        ...(spec.body ? { body: spec.body } : {}),
        response: job ? { 202: jobAccepted } : { 200: spec.response as z.ZodType },
      },
      handler: async (req, reply) => {
        const user = req.user!;
        const id = o.singleton ? 1 : (req.params as { id: number }).id;
        const result = await spec.run({ id, body: req.body as never, user, author: authorOf(user)! });
        return job ? reply.status(202).send({ job_id: result as string }) : result;
      },
    });
  }
}

/** Actions on the settings (POST /api/v1/settings/actions/<name>): features add theirs, such as running a job now. */
export function registerSettingsActions(parent: FastifyInstance, group: UserGroup, actions: Record<string, ActionSpec>) {
  registerActions(parent, { path: '/settings', tag: 'settings', group, singleton: true, actions });
}
