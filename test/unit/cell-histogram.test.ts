// CellHistogram (src/core/metrics.ts), the histogram counted on every HTTP request: the same
// observations give the same scrape text and get() as prom-client's own Histogram.
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { cellHistogram, processMetrics } from '../../src/core/metrics.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// On a bound, between, below the first, above the last, tiny.
const VALUES = [0, 0.005, 0.0051, 0.01, 0.3, 3, 10, 11, 1e-9, 0.0012];

/** This metric's block of a scrape. */
async function block(registry: Registry, name: string): Promise<string> {
  return (await registry.metrics())
    .split('\n\n')
    .find((b) => b.includes(`# TYPE ${name} `))!
    .trimEnd();
}

describe('CellHistogram', () => {
  it('scrapes and reads as prom-client’s Histogram for the same observations, through cells or observe()', async () => {
    const name = 'test_cell_histogram_seconds';
    const reference = new Registry();
    const ref = new Histogram({ name, help: 'h', labelNames: ['method', 'route', 'status'], buckets: BUCKETS, registers: [reference] });
    const cells = cellHistogram({ name, help: 'h', labelNames: ['method', 'route', 'status'], buckets: BUCKETS });
    for (const [i, value] of VALUES.entries()) {
      // A label value that needs escaping in the text format, and two ways of counting.
      const labels = { method: i % 2 ? 'GET' : 'POST', route: '/a/"b"\\c', status: String(200 + (i % 3)) };
      ref.observe(labels, value);
      if (i % 2) cells.observe(labels, value);
      else cells.cell(labels).observe(value);
    }
    ref.zero({ method: 'PUT', route: '/z', status: '204' });
    cells.zero({ method: 'PUT', route: '/z', status: '204' });

    expect(await block(processMetrics, name)).toBe(await block(reference, name));
    expect(await cells.get()).toEqual(await ref.get());
  });

  it('keeps a cell held by its caller counting after reset(), from 0', async () => {
    const histogram = cellHistogram({ name: 'test_cell_histogram_reset_seconds', help: 'h', labelNames: ['route'], buckets: [1] });
    const cell = histogram.cell({ route: '/r' });
    cell.observe(0.5);
    histogram.reset();
    cell.observe(2);
    const values = (await histogram.get()).values.map((v) => [v.metricName, (v.labels as { le?: unknown }).le, v.value]);
    expect(values).toEqual([
      ['test_cell_histogram_reset_seconds_bucket', 1, 0],
      ['test_cell_histogram_reset_seconds_bucket', '+Inf', 1],
      ['test_cell_histogram_reset_seconds_sum', undefined, 2],
      ['test_cell_histogram_reset_seconds_count', undefined, 1],
    ]);
    expect(() => cell.observe(Number.NaN)).toThrow(TypeError);
  });
});
