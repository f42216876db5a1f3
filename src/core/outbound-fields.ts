// What operators store for the outbound client to use, checked when it is written (a 400 naming the
// field) and again when a value stored before these rules is used (a 400 user_error, never a 500):
// a base URL the client appends API paths to, and a secret it sends in an HTTP header.
import { z } from 'zod';
import { UserError } from './errors.js';

/**
 * Why `value` is not an outbound URL, or null: http(s) with a host, no credentials (they belong in
 * their own fields), no fragment, and for a base URL no query (`…/internal?` would turn the API
 * path appended to it into a query string).
 */
export function urlProblem(value: string, opts: { base: boolean }): string | null {
  if (!/^https?:\/\/[^/\s]+/i.test(value) || !URL.canParse(value)) return 'must be an http:// or https:// URL';
  const url = new URL(value);
  if (url.username || url.password) return 'must not carry credentials (user:password@)';
  if (opts.base && value.includes('?')) return 'must not have a query (?…): API paths are appended to it';
  if (value.includes('#')) return 'must not have a fragment (#…)';
  return null;
}

/** A base URL field: http(s), no credentials, query or fragment. */
export const httpBaseUrl = z
  .string()
  .trim()
  .max(2000)
  .superRefine((value, check) => {
    const problem = urlProblem(value, { base: true });
    if (problem) check.addIssue({ code: 'custom', message: problem });
  });

/** `path` appended to a stored base URL; one that breaks the rules above is refused, not called. */
export function joinUrl(base: string, path: string): string {
  const problem = urlProblem(base, { base: true });
  if (problem) throw new UserError(`The stored url ${base} ${problem}: set it again`);
  return `${base.replace(/\/+$/, '')}${path}`;
}

/**
 * A secret sent in an HTTP header (API key, bearer token): printable ASCII without spaces. A header
 * value cannot hold characters beyond Latin-1 or line breaks at all, and Latin-1 letters reach
 * each server as bytes it may read in another charset, so they are refused too.
 */
export function headerSecret(schema: z.ZodString): z.ZodString {
  return schema.regex(/^[\x21-\x7e]*$/, 'printable ASCII characters without spaces only (it is sent in an HTTP header)');
}
