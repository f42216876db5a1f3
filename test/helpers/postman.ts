// The OpenAPI document as the app serves it, and the Postman collection made of it the way the
// README says (openapi-to-postmanv2, the converter of Postman's import).
import type { FastifyInstance } from 'fastify';
import Converter from 'openapi-to-postmanv2';

export interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { name: string; in: string; required?: boolean; schema: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: { example?: unknown } & Record<string, unknown> }> };
  responses: Record<
    string,
    { description: string; $ref?: string; headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }
  >;
}
export interface Doc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  security?: unknown;
  tags?: { name: string; description?: string }[];
  servers: { url: string; variables?: unknown }[];
  components: { responses: Record<string, unknown>; schemas: Record<string, unknown> };
}

export interface Item {
  name: string;
  item?: Item[];
  request?: {
    method: string;
    url: {
      raw?: string;
      path?: string[];
      query?: { key: string; value: string; disabled?: boolean }[];
      variable?: { key: string; value: string }[];
    };
    body?: { mode: string; raw?: string; urlencoded?: { key: string; value: string }[] };
    header?: { key: string; value: string }[];
  };
}
export interface Collection {
  item: Item[];
  variable: { key: string; value: string }[];
  auth?: { type: string; bearer: { key: string; value: string }[] };
}

export async function servedDocument(app: FastifyInstance): Promise<Doc> {
  return (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
}

/** openapi-to-postmanv2 with `options` (the README's: { parametersResolution: 'Example' }). */
export function convert(doc: Doc, options: Record<string, unknown> = {}): Promise<Collection> {
  return new Promise((resolve, reject) =>
    Converter.convertV2({ type: 'json', data: structuredClone(doc) as never }, options, (err, res) => {
      if (err || !res?.result) return reject(new Error(err?.message ?? res?.reason ?? 'conversion failed'));
      resolve((res.output as unknown as { data: Collection }[])[0]!.data);
    }),
  );
}

/** The requests of a collection, out of their folders. */
export function requestsOf(items: Item[]): Item[] {
  return items.flatMap((i) => (i.item ? requestsOf(i.item) : [i]));
}

export const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

/** OpenAPI 3.0 schema → JSON Schema for Ajv: `nullable` allows null (an enum's too, as tools read it). */
export function toJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const { nullable, ...rest } = schema as Record<string, unknown> & { nullable?: boolean };
  const out = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, toJsonSchema(v)]));
  return nullable ? { anyOf: [out, { type: 'null' }] } : out;
}
