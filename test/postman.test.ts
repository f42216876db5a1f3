// The OpenAPI document as generators, linters and Postman users meet it, in one place: valid
// OpenAPI 3 (JSON and YAML), a unique operationId and a summary per operation (Postman names its
// requests after them), the group it needs, the bearer scheme; integers typed as integers with
// bounds and an example the route takes; client errors and a described success answer for every
// operation; tags declared; ETag, If-Match and Link where the API sends or reads them; every request
// body with an example its schema accepts. Converted with openapi-to-postmanv2 (the converter of
// Postman's import): a request per operation named after its summary, bearer auth reading the
// bearerToken variable, bodies that are the examples. test/newman.test.ts runs that collection.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { useTestApp } from './helpers/app.js';
import { convert, type Doc, operations, requestsOf, servedDocument, toJsonSchema } from './helpers/postman.js';

const t = useTestApp();
const openapi = () => servedDocument(t.app);

/**
 * get, create, update or delete when the operation is one of those of a record that can change:
 * they send an ETag, and PATCH/DELETE read If-Match. Not: records only the service writes (action
 * logs, jobs, trial verifications) and API tokens (shown once, never changed).
 */
function recordRoute(op: { operationId?: string }): string | undefined {
  const [, resource, kind] = /^(\w+)\.(get|create|update|delete)$/.exec(op.operationId ?? '') ?? [];
  return resource && !['actionLogs', 'jobs', 'trialVerifications', 'apiTokens'].includes(resource) ? kind : undefined;
}

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3; every operation has a unique operationId, a summary and a description naming its group', async () => {
    const doc = await openapi();
    expect(doc.openapi).toMatch(/^3\./);
    await SwaggerParser.validate(structuredClone(doc) as never);
    const ops = operations(doc);
    // Each operation is a route the app serves, and each declared tag has operations.
    for (const { path, method } of ops) {
      expect(t.app.hasRoute({ method: method.toUpperCase() as 'GET', url: path.replace(/\{(\w+)\}/g, ':$1') }), `${method} ${path}`).toBe(
        true,
      );
    }
    expect(new Set(ops.flatMap(({ op }) => op.tags ?? []))).toEqual(new Set(doc.tags?.map((tag) => tag.name)));
    const ids = ops.map(({ op }) => op.operationId);
    expect(ids.filter((id) => !id)).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of ops) {
      expect(op.summary, `${method} ${path}`).toBeTruthy();
      expect(op.description, `${method} ${path}`).toMatch(/(Public: no token\.|Needs a token of the \w+ group( or above)?\.)$/);
    }
  });

  it('declares the bearer scheme for the API; the public routes are described too, without a token', async () => {
    const doc = await openapi();
    expect(doc.security).toEqual([{ bearer: [] }]);
    expect(doc.servers).toEqual([{ url: 'http://svc.test', description: expect.any(String) }]);
    for (const { path, op } of operations(doc)) {
      if (path.startsWith('/api/v1/')) expect(op.security, path).toBeUndefined();
      else expect(op.security, path).toEqual([]);
    }
    for (const path of [
      '/svc/webhook/{token}',
      '/saas/trial',
      '/saas/trial/{url_string}',
      '/saas/trial/submit',
      '/saas/trial/verify',
      '/saas/trial/resend',
      '/healthz',
    ]) {
      expect(doc.paths[path], path).toBeDefined();
    }
    // The webhook endpoint answers JSON of its own shape, and says so.
    const webhook = doc.paths['/svc/webhook/{token}']!.post!;
    expect(webhook.responses['200']!.content!['application/json']!.schema).toMatchObject({ type: 'object', additionalProperties: false });
    for (const status of ['400', '500']) {
      expect(webhook.responses[status]!.content!['application/json']!.schema, status).toMatchObject({
        properties: { error: { type: 'string' } },
      });
    }
  });

  it('types every integer parameter as an integer with bounds and an example within them; nothing is a string of digits', async () => {
    const doc = await openapi();
    for (const { path, method, op } of operations(doc)) {
      // Every {placeholder} of the path is a declared parameter (so none escapes the checks below).
      const placeholders = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(
        (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
        `${method} ${path}`,
      ).toEqual(placeholders);
      for (const p of op.parameters ?? []) {
        const where = `${method} ${path} ${p.in} ${p.name}`;
        const s = p.schema as { type?: string; pattern?: string; minimum?: number; maximum?: number; example?: number };
        expect(s.pattern ?? '', where).not.toMatch(/^\^\(?-?\??\(?0\|\[1-9\]/);
        // Job ids are text ("maintenance-ltx2kq-3"): every other id is an integer.
        const jobId = p.name === 'job_id' || path.startsWith('/api/v1/jobs/');
        if ((p.name === 'id' || p.name.endsWith('_id') || p.name === 'limit' || p.name === 'offset') && !jobId) {
          expect(s.type, where).toBe('integer');
        }
        if (s.type !== 'integer') continue;
        expect(
          [s.minimum, s.maximum, s.example].every((v) => typeof v === 'number'),
          where,
        ).toBe(true);
        expect(s.example! >= s.minimum! && s.example! <= s.maximum!, where).toBe(true);
      }
    }
  });

  it('documents the client errors of every API operation and describes every success answer; tags are declared', async () => {
    const doc = await openapi();
    const declared = new Set(doc.tags?.map((tag) => tag.name));
    for (const { path, method, op } of operations(doc)) {
      const where = `${method} ${path}`;
      const statuses = Object.keys(op.responses);
      expect(statuses.some((s) => /^4\d\d$/.test(s)) || ['/healthz', '/saas/trial'].includes(path), where).toBe(true);
      for (const [status, answer] of Object.entries(op.responses)) {
        if (answer.$ref) expect(answer.$ref, where).toMatch(/^#\/components\/responses\/\w+$/);
        else expect(answer.description, `${where} ${status}`).not.toMatch(/^(Default Response)?$/);
      }
      for (const tag of op.tags ?? []) expect(declared.has(tag), `${where} tag ${tag}`).toBe(true);
      if (!path.startsWith('/api/v1/')) continue;
      expect(statuses, where).toEqual(expect.arrayContaining(['400', '401', 'default']));
      if (path.includes('{')) expect(statuses, where).toContain('404');
      if (op.requestBody) expect(statuses, where).toEqual(expect.arrayContaining(['413', '415']));
    }
  });

  it('says which answers carry an ETag, which requests take If-Match (412 when stale), and that lists send Link: rel="next"', async () => {
    const doc = await openapi();
    for (const { path, method, op } of operations(doc)) {
      const kind = recordRoute(op);
      const success = Object.entries(op.responses).find(([s]) => s.startsWith('2'))![1];
      if (kind === 'get' || kind === 'create' || (kind === 'update' && method === 'patch')) {
        expect(success.headers, `${method} ${path}`).toHaveProperty('ETag');
      }
      if ((method === 'patch' || method === 'delete') && kind) {
        expect(
          op.parameters?.some((p) => p.in === 'header' && p.name === 'if-match'),
          `${method} ${path}`,
        ).toBe(true);
        expect(op.responses, `${method} ${path}`).toHaveProperty('412');
      }
      if (op.operationId?.endsWith('.list')) expect(success.headers, `${method} ${path}`).toHaveProperty('Link');
    }
  });

  it('every request body has an example that its own schema accepts; an optional body is not required', async () => {
    const doc = await openapi();
    const ajv = new Ajv({ strict: false, allErrors: true });
    ajv.addKeyword('example');
    const missing: string[] = [];
    for (const { path, method, op } of operations(doc)) {
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        const { example, ...schema } = media.schema;
        if (example === undefined) {
          missing.push(`${method} ${path} (${type})`);
          continue;
        }
        const validate = ajv.compile(toJsonSchema(schema) as object);
        expect(validate(example), `${method} ${path}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    }
    expect(missing).toEqual([]);
    expect(doc.paths['/api/v1/root-servers/{id}/actions/run_cmd']!.post!.requestBody?.required).not.toBe(true);
  });

  it('is served as YAML too, the same document', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/openapi.yaml' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/yaml/);
    const dir = await mkdtemp(path.join(tmpdir(), 'svc-openapi-'));
    try {
      await writeFile(path.join(dir, 'openapi.yaml'), res.body);
      expect(await SwaggerParser.parse(path.join(dir, 'openapi.yaml'))).toEqual(await openapi());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('imported into Postman', () => {
  it('has a request per operation, named after its summary, with bearer auth reading the bearerToken variable', async () => {
    const doc = await openapi();
    const collection = await convert(doc);
    const all = requestsOf(collection.item);
    expect(all).toHaveLength(operations(doc).length);
    const summaries = new Set(operations(doc).map(({ op }) => op.summary));
    for (const r of all) {
      expect(summaries.has(r.name), r.name).toBe(true);
      expect(r.name).not.toMatch(/group|Requires|Needs a token/);
    }
    expect(collection.auth).toMatchObject({ type: 'bearer', bearer: [{ key: 'token', value: '{{bearerToken}}' }] });
    expect(collection.variable).toEqual(expect.arrayContaining([{ key: 'baseUrl', value: 'http://svc.test' }]));
  });

  it('with the default settings, no body is null (every schema can be faked)', async () => {
    const doc = await openapi();
    const bySummary = new Map(requestsOf((await convert(doc)).item).map((r) => [r.name, r]));
    for (const { path, method, op } of operations(doc)) {
      if (!op.requestBody?.content['application/json']) continue;
      const raw = bySummary.get(op.summary!)!.request?.body?.raw;
      expect(raw, `${method} ${path}`).toBeTruthy();
      expect(JSON.parse(raw!), `${method} ${path}`).not.toBeNull();
    }
  });

  it('with example parameters, every body is the example and every integer parameter its example', async () => {
    const doc: Doc = await openapi();
    const collection = await convert(doc, { parametersResolution: 'Example' });
    const bySummary = new Map(requestsOf(collection.item).map((r) => [r.name, r]));
    for (const { path, method, op } of operations(doc)) {
      const request = bySummary.get(op.summary!)!.request!;
      const json = op.requestBody?.content['application/json'];
      if (json) {
        expect(request.body?.raw, `${method} ${path}`).toBeDefined();
        expect(JSON.parse(request.body!.raw!), `${method} ${path}`).toEqual(json.schema.example);
      }
      const sent = new Map([...(request.url.variable ?? []), ...(request.url.query ?? [])].map((v) => [v.key, v.value]));
      for (const p of op.parameters ?? []) {
        if (p.schema.type === 'integer' && sent.has(p.name))
          expect(sent.get(p.name), `${method} ${path} ${p.name}`).toBe(String(p.schema.example));
      }
    }
  });
});
