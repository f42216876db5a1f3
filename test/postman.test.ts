// The OpenAPI document as Postman users meet it (DESIGN §11): converted with openapi-to-postmanv2
// (the converter Postman's import uses), every operation becomes a request named after its
// summary, under a bearer-token collection whose variables define bearerToken; every request body
// carries a valid example. Real PostgreSQL and Redis behind the app that serves the document.
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv } from 'ajv';
import Converter from 'openapi-to-postmanv2';
import { describe, expect, it } from 'vitest';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  security?: unknown[];
  requestBody?: { required?: boolean; content: Record<string, { schema: { example?: unknown } & Record<string, unknown> }> };
}
type Doc = { paths: Record<string, Record<string, Operation>>; security?: unknown };
interface Item {
  name: string;
  item?: Item[];
  request?: { method: string; url: { path?: string[] }; body?: { mode: string; raw?: string } };
}
interface Collection {
  item: Item[];
  variable: { key: string; value: string }[];
  auth?: { type: string; bearer: { key: string; value: string }[] };
}

async function openapi(): Promise<Doc> {
  return (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
}

function convert(doc: Doc, options: Record<string, unknown> = {}): Promise<Collection> {
  return new Promise((resolve, reject) =>
    Converter.convertV2({ type: 'json', data: structuredClone(doc) as never }, options, (err, res) => {
      if (err || !res?.result) return reject(new Error(err?.message ?? res?.reason ?? 'conversion failed'));
      resolve((res.output as unknown as { data: Collection }[])[0]!.data);
    }),
  );
}

function requests(items: Item[]): Item[] {
  return items.flatMap((i) => (i.item ? requests(i.item) : [i]));
}

const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3, every operation has a unique operationId, a summary and a description naming its group', async () => {
    const doc = await openapi();
    await SwaggerParser.validate(structuredClone(doc) as never);
    const ops = operations(doc);
    expect(ops.length).toBeGreaterThan(180);
    const ids = ops.map(({ op }) => op.operationId);
    expect(ids.filter((id) => !id)).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of ops) {
      expect(op.summary, `${method} ${path}`).toBeTruthy();
      expect(op.description, `${method} ${path}`).toMatch(/(Public: no token\.|Needs a token of the \w+ group( or above)?\.)$/);
    }
    // The public routes are described too, without a token.
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
      for (const op of Object.values(doc.paths[path]!)) expect(op.security).toEqual([]);
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
});

describe('imported into Postman', () => {
  it('has a request per operation, named after its summary, with bearer auth and a bearerToken variable', async () => {
    const doc = await openapi();
    const collection = await convert(doc);
    const all = requests(collection.item);
    expect(all).toHaveLength(operations(doc).length);
    const summaries = new Set(operations(doc).map(({ op }) => op.summary));
    for (const r of all) {
      expect(summaries.has(r.name), r.name).toBe(true);
      expect(r.name).not.toMatch(/group|Requires|Needs a token/);
    }
    expect(collection.auth).toMatchObject({ type: 'bearer', bearer: [{ key: 'token', value: '{{bearerToken}}' }] });
    expect(collection.variable.map((v) => v.key)).toEqual(expect.arrayContaining(['baseUrl', 'bearerToken']));
  });

  it('with the default settings, no body is null (every schema can be faked)', async () => {
    const doc = await openapi();
    const bySummary = new Map(requests((await convert(doc)).item).map((r) => [r.name, r]));
    for (const { path, method, op } of operations(doc)) {
      if (!op.requestBody?.content['application/json']) continue;
      const raw = bySummary.get(op.summary!)!.request?.body?.raw;
      expect(raw, `${method} ${path}`).toBeTruthy();
      expect(JSON.parse(raw!), `${method} ${path}`).not.toBeNull();
    }
  });

  it('with example parameters, every body is the example: no null and no random values', async () => {
    const doc = await openapi();
    const collection = await convert(doc, { parametersResolution: 'Example' });
    const bySummary = new Map(requests(collection.item).map((r) => [r.name, r]));
    for (const { path, method, op } of operations(doc)) {
      const json = op.requestBody?.content['application/json'];
      if (!json) continue;
      const request = bySummary.get(op.summary!)!;
      expect(request.request?.body?.raw, `${method} ${path}`).toBeDefined();
      expect(JSON.parse(request.request!.body!.raw!), `${method} ${path}`).toEqual(json.schema.example);
    }
  });
});

/** OpenAPI 3.0 schema → JSON Schema for Ajv: `nullable` becomes a type union. */
function toJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const { nullable, ...rest } = schema as Record<string, unknown> & { nullable?: boolean };
  const out = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, toJsonSchema(v)]));
  if (!nullable) return out;
  if (typeof out.type === 'string') return { ...out, type: [out.type, 'null'] };
  return { anyOf: [out, { type: 'null' }] };
}
