// nextPageUrl(): the one place that knows how a list pages, on answers as lists give them.
import { describe, expect, it } from 'vitest';
import { nextPageUrl } from '../../src/core/http/list-links.js';

const base = 'https://svc.example.org/prefix';
const page = (over: object) => ({ items: [{}, {}], total: 5, limit: 2, offset: 0, ...over });

describe('nextPageUrl', () => {
  it('by offset: the next offset with the same limit and filters, absolute under BASE_URL; none on the last page', () => {
    expect(nextPageUrl(base, '/api/v1/partners?q=a%20b&limit=2', page({}))).toBe(
      'https://svc.example.org/prefix/api/v1/partners?q=a+b&limit=2&offset=2',
    );
    expect(nextPageUrl(base, '/api/v1/partners', page({ offset: 2, limit: 50, total: 5 }))).toBeNull();
    expect(nextPageUrl(base, '/api/v1/partners?offset=2&limit=2', page({ offset: 2 }))).toBe(
      'https://svc.example.org/prefix/api/v1/partners?offset=4&limit=2',
    );
    expect(nextPageUrl(base, '/api/v1/partners?offset=4&limit=2', page({ offset: 4, items: [{}] }))).toBeNull();
  });

  it('by cursor when the answer has next_cursor: ?cursor= replaces ?offset=; null is the last page', () => {
    expect(nextPageUrl(base, '/api/v1/action-logs?sort=-created_at&offset=0', page({ next_cursor: 'abc.def' }))).toBe(
      'https://svc.example.org/prefix/api/v1/action-logs?sort=-created_at&limit=2&cursor=abc.def',
    );
    expect(nextPageUrl(base, '/api/v1/action-logs?cursor=abc.def', page({ next_cursor: null, total: 500 }))).toBeNull();
  });

  it('by offset when the list says it pages by offset, although its answer has next_cursor: null', () => {
    expect(nextPageUrl(base, '/api/v1/jobs?state=failed&limit=2', page({ next_cursor: null }), 'offset')).toBe(
      'https://svc.example.org/prefix/api/v1/jobs?state=failed&limit=2&offset=2',
    );
    expect(nextPageUrl(base, '/api/v1/jobs?offset=4&limit=2', page({ offset: 4, next_cursor: null }), 'offset')).toBeNull();
  });
});
