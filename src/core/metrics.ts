// Metrics for Prometheus (prom-client). Two kinds:
// - instruments of this process (counters, histograms, gauges of what it holds), in one registry
//   per process: counter(), histogram() and gauge() get or create them by name, so a module
//   loaded twice, or two contexts in one process (tests), share one series;
// - series read at scrape time from PostgreSQL or Redis (fleet state, queue depths), given by the
//   features as MetricsSources: each is read at most once per SOURCE_CACHE_MS whatever the number
//   of scrapes, with a timeout, and a source that fails or times out is left out of the scrape
//   (which still answers) and said so.
import type { Worker } from 'bullmq';
import {
  type CounterConfiguration,
  Counter,
  Gauge,
  type GaugeConfiguration,
  Histogram,
  type HistogramConfiguration,
  type LabelValues,
  Registry,
} from 'prom-client';
import { noAnswer, withTimeout } from './timeout.js';

/** The instruments of this process. */
export const processMetrics = new Registry();

export const METRICS_CONTENT_TYPE = processMetrics.contentType;

function getOrCreate<M>(name: string, create: () => M): M {
  return (processMetrics.getSingleMetric(name) as M | undefined) ?? create();
}

export function counter<L extends string>(cfg: Omit<CounterConfiguration<L>, 'registers'>): Counter<L> {
  return getOrCreate(cfg.name, () => new Counter({ ...cfg, registers: [processMetrics] }));
}

export function histogram<L extends string>(cfg: Omit<HistogramConfiguration<L>, 'registers'>): Histogram<L> {
  return getOrCreate(cfg.name, () => new Histogram({ ...cfg, registers: [processMetrics] }));
}

export function gauge<L extends string>(cfg: Omit<GaugeConfiguration<L>, 'registers'>): Gauge<L> {
  return getOrCreate(cfg.name, () => new Gauge({ ...cfg, registers: [processMetrics] }));
}

// --- a histogram on every request's path ----------------------------------------------------

/** The counts of one label set of a CellHistogram: found once, kept by the caller. */
export class HistogramCell {
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: LabelValues<string>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i += 1;
    this.counts[i] = this.counts[i]! + 1;
    this.sum += value;
    this.count += 1;
  }
}

type CellHistogramConfiguration<L extends string> = Omit<HistogramConfiguration<L>, 'registers' | 'collect' | 'buckets'> & {
  buckets: readonly number[];
};

/**
 * A histogram observed on every request. prom-client's observe() takes about 1 µs a call (it hashes
 * the label values and finds the bucket through its bound formatted as a property name, per call);
 * here cell() finds a label set once, for the caller to keep, and the cell's observe() is a few
 * additions. Scraped like any histogram of processMetrics (get() gives prom-client's own shape);
 * observe(labels, value), zero() and reset() work as prom-client's do; labels(), startTimer() and
 * remove() are refused (not used; they would count where get() does not read).
 */
export class CellHistogram<L extends string> extends Histogram<L> {
  // Set after prom-client's constructor, which calls reset() and registers the metric.
  private cellMap: Map<string, HistogramCell> | undefined;
  private readonly bounds: readonly number[];

  constructor(private readonly cfg: CellHistogramConfiguration<L>) {
    super({ ...cfg, buckets: [...cfg.buckets], registers: [processMetrics] });
    this.bounds = [...cfg.buckets].sort((a, b) => a - b);
    this.cellMap = new Map();
    // prom-client sets observe on the instance in its constructor: replaced here.
    this.observe = ((labels: LabelValues<L>, value: number) => this.cell(labels).observe(value)) as Histogram<L>['observe'];
  }

  /** The cell of this label set (created at 0 the first time). */
  cell(labels: LabelValues<L>): HistogramCell {
    const values = (this.cfg.labelNames ?? []).map((name) => String(labels[name] ?? ''));
    const key = values.join('\u0000');
    let cell = this.cellMap!.get(key);
    if (!cell) {
      const own: LabelValues<string> = {};
      for (const name of this.cfg.labelNames ?? []) if (labels[name] !== undefined) own[name] = labels[name];
      cell = new HistogramCell(own, this.bounds);
      this.cellMap!.set(key, cell);
    }
    return cell;
  }

  /** Every label set's cell, for series derived from these counts (a request counter). */
  cells(): IterableIterator<HistogramCell> {
    return this.cellMap!.values();
  }

  override zero(labels: LabelValues<L>): void {
    this.cell(labels);
  }

  /** Every cell back to 0: cells kept by callers go on counting. */
  override reset(): void {
    for (const cell of this.cellMap?.values() ?? []) {
      cell.counts.fill(0);
      cell.sum = 0;
      cell.count = 0;
    }
  }

  override labels(): never {
    throw new Error(`${this.cfg.name}: labels() is not supported: use cell()`);
  }

  override startTimer(): never {
    throw new Error(`${this.cfg.name}: startTimer() is not supported: use cell()`);
  }

  override remove(): never {
    throw new Error(`${this.cfg.name}: remove() is not supported`);
  }

  override async get(): Promise<Awaited<ReturnType<Histogram<L>['get']>>> {
    const { name, help } = this.cfg;
    const values: { value: number; metricName: string; exemplar?: null; labels: LabelValues<string> }[] = [];
    for (const cell of this.cellMap!.values()) {
      const labels = cell.labels;
      const bucket = `${name}_bucket`;
      let total = 0;
      this.bounds.forEach((le, i) => {
        total += cell.counts[i]!;
        values.push({ value: total, metricName: bucket, exemplar: null, labels: { le, ...labels } });
      });
      values.push({ value: cell.count, metricName: bucket, exemplar: null, labels: { le: '+Inf', ...labels } });
      values.push({ value: cell.sum, metricName: `${name}_sum`, labels });
      values.push({ value: cell.count, metricName: `${name}_count`, labels });
    }
    // prom-client's own shape, to the order of the labels (its get() reads what it counted itself: nothing).
    return { name, help, type: 'histogram', values, aggregator: this.cfg.aggregator ?? 'sum' } as unknown as Awaited<
      ReturnType<Histogram<L>['get']>
    >;
  }

  /** What the registry formats (prom-client's Histogram has its own, reading what it counted). */
  getForPromString() {
    return this.get();
  }
}

/** The CellHistogram of this name in processMetrics, made the first time. */
export function cellHistogram<L extends string>(cfg: CellHistogramConfiguration<L>): CellHistogram<L> {
  return getOrCreate(cfg.name, () => new CellHistogram(cfg));
}

// --- the process ---------------------------------------------------------------------------
// The usual process_* and nodejs_* series, read only when scraped. (prom-client's
// collectDefaultMetrics also samples the event loop every 10 ms and observes every garbage
// collection: a steady cost on the monitoring poll path, which is measured to stay within 5 %.)
const cpuSeconds = (kind: 'user' | 'system') =>
  counter({
    name: `process_cpu_${kind}_seconds_total`,
    help: `${kind === 'user' ? 'User' : 'System'} CPU time spent by this process, in seconds`,
    collect() {
      this.reset();
      this.inc(process.cpuUsage()[kind] / 1e6);
    },
  });
cpuSeconds('user');
cpuSeconds('system');
gauge({
  name: 'process_resident_memory_bytes',
  help: 'Resident memory of this process, in bytes',
  collect() {
    this.set(process.memoryUsage.rss());
  },
});
gauge({
  name: 'nodejs_heap_size_used_bytes',
  help: 'V8 heap in use, in bytes',
  collect() {
    this.set(process.memoryUsage().heapUsed);
  },
});
gauge({ name: 'process_start_time_seconds', help: 'When this process started, in seconds since the epoch' }).set(
  Math.round(Date.now() / 1000 - process.uptime()),
);

// --- jobs run by this process --------------------------------------------------------------
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800];

/** Counts the jobs a BullMQ worker of this process finishes, by queue, job name and outcome, with their run time. */
export function instrumentWorker(worker: Worker, jobNames: readonly string[]) {
  const known = new Set(jobNames);
  const finished = counter({
    name: 'svc_jobs_finished_total',
    help: 'Jobs run by this process, by queue, job name and outcome (completed, failed: a failed attempt counts once)',
    labelNames: ['queue', 'name', 'outcome'],
  });
  const duration = histogram({
    name: 'svc_job_duration_seconds',
    help: 'Run time of the jobs this process ran (start to end of an attempt), by queue and job name',
    labelNames: ['queue', 'name'],
    buckets: JOB_BUCKETS,
  });
  const record = (job: { name: string; processedOn?: number; finishedOn?: number } | undefined, outcome: string) => {
    if (!job) return;
    // A name not in the catalog (written to Redis by something else) is not a label value.
    const labels = { queue: worker.name, name: known.has(job.name) ? job.name : 'unknown' };
    finished.inc({ ...labels, outcome });
    if (job.processedOn) duration.observe(labels, ((job.finishedOn ?? Date.now()) - job.processedOn) / 1000);
  };
  worker.on('completed', (job) => record(job, 'completed'));
  worker.on('failed', (job) => record(job, 'failed'));
}

// --- series read at scrape time ------------------------------------------------------------
export type Labels = Record<string, string | number>;
export interface Sample {
  labels?: Labels;
  value: number;
}

export interface ScrapedGauge {
  name: string;
  help: string;
  labelNames?: readonly string[];
}

/** Series a feature reads at scrape time (from PostgreSQL or Redis): the whole fleet's, the same in every process. */
export interface MetricsSource {
  /** Names the source in svc_scrape_source_up. */
  name: string;
  /** What it reads: when that is down, the source is not read (its series are left out). */
  needs: 'postgresql' | 'redis';
  gauges: readonly ScrapedGauge[];
  /** The samples of each gauge, by gauge name. */
  read(): Promise<Record<string, readonly Sample[]>>;
}

/** A source is read at most this often; scrapes in between (several Prometheus servers) get the same figures. */
export const SOURCE_CACHE_MS = 5_000;
/** A source that takes longer is left out of this scrape (the next one tries again). */
const SOURCE_TIMEOUT_MS = 3_000;

export interface ScrapeRegistry {
  /**
   * The scrape-time series in the text format. `down`: the dependencies found down (their sources
   * are not read). Never throws: a failed source is logged and reported as svc_scrape_source_up 0.
   */
  metrics(down: ReadonlySet<string>): Promise<string>;
}

export function createScrapeRegistry(sources: readonly MetricsSource[], onError: (source: string, err: unknown) => void): ScrapeRegistry {
  const registry = new Registry();
  const gauges = new Map<string, Gauge<string>>();
  for (const source of sources) {
    for (const g of source.gauges) {
      gauges.set(g.name, new Gauge({ name: g.name, help: g.help, labelNames: [...(g.labelNames ?? [])], registers: [registry] }));
    }
  }
  // Only where sources are read (a worker's own scrape reads none).
  const sourceUp =
    sources.length > 0
      ? new Gauge({
          name: 'svc_scrape_source_up',
          help: 'Whether a group of fleet series could be read for this scrape (0: left out: its database or Redis is down, or it failed)',
          labelNames: ['source'],
          registers: [registry],
        })
      : null;
  const cache = new Map<string, { at: number; values: Promise<Record<string, readonly Sample[]>> }>();

  function read(source: MetricsSource) {
    const cached = cache.get(source.name);
    if (cached && Date.now() - cached.at < SOURCE_CACHE_MS) return cached.values;
    const values = withTimeout(source.read(), SOURCE_TIMEOUT_MS, noAnswer(`metrics source ${source.name}`, SOURCE_TIMEOUT_MS));
    cache.set(source.name, { at: Date.now(), values });
    // A failure is not kept: the next scrape tries again.
    values.catch(() => {
      if (cache.get(source.name)?.values === values) cache.delete(source.name);
    });
    return values;
  }

  /** The text of the last scrape, and what it was made of: scrapes served from the cache reuse it. */
  let made: { inputs: unknown[]; text: string } | null = null;

  /** One scrape's figures are set and formatted before the next one's are set (formatting awaits). */
  async function scrape(down: ReadonlySet<string>) {
    const results = await Promise.all(
      sources.map(async (source) => {
        if (down.has(source.needs)) return { source, values: null };
        try {
          return { source, values: await read(source) };
        } catch (err) {
          onError(source.name, err);
          return { source, values: null };
        }
      }),
    );
    const inputs = results.map((r) => r.values);
    if (made && inputs.every((v, i) => v === made!.inputs[i])) return made.text;
    for (const { source, values } of results) {
      sourceUp?.set({ source: source.name }, values ? 1 : 0);
      for (const g of source.gauges) {
        const gauge = gauges.get(g.name)!;
        gauge.reset();
        for (const s of values?.[g.name] ?? []) gauge.set(s.labels ?? {}, s.value);
      }
    }
    made = { inputs, text: await registry.metrics() };
    return made.text;
  }

  let last: Promise<unknown> = Promise.resolve();
  return {
    metrics(down) {
      const run = last.then(() => scrape(down));
      // Only the order: the next scrape waits for this one; its failure is the caller's, through `run`.
      last = run.catch(() => {});
      return run;
    },
  };
}
