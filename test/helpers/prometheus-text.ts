// Reading a /metrics answer with a Prometheus text-format parser (parse-prometheus-text-format, a
// port of the Prometheus Python client's parser): families by name, and one sample's value.
import parse from 'parse-prometheus-text-format';

export interface Family {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: { labels?: Record<string, string>; value?: string; count?: string; sum?: string; buckets?: Record<string, string> }[];
}

/**
 * Parses a scrape; throws on text the parser refuses. The parser folds the samples of a labelled
 * histogram into one (it keeps neither labels nor counts), so the same text is parsed a second
 * time with its histograms declared untyped: each `<name>_count`, `_sum` and `_bucket` is then a
 * family of its own, with its labels (the runs of one name joined).
 */
export function parseScrape(text: string): Map<string, Family> {
  const families = new Map((parse(text) as Family[]).map((f) => [f.name, f]));
  const untyped = parse(text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped')) as Family[];
  // A histogram's lines come label set by label set, so one name makes several runs here: joined.
  const parts = new Map<string, Family>();
  for (const f of untyped) {
    if (families.has(f.name)) continue;
    const known = parts.get(f.name);
    if (known) known.metrics.push(...f.metrics);
    else parts.set(f.name, { ...f, metrics: [...f.metrics] });
  }
  for (const [name, f] of parts) families.set(name, f);
  return families;
}

const matches = (labels: Record<string, string> | undefined, want: Record<string, string>) =>
  Object.entries(want).every(([k, v]) => labels?.[k] === v);

/** The value of the family's sample with these labels (a histogram: its count); 0 when there is none. */
export function sampleOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name)?.type === 'HISTOGRAM' ? `${name}_count` : name;
  const sample = families.get(family)?.metrics.find((m) => matches(m.labels, labels));
  return Number(sample?.value ?? 0);
}

/** Every sample of a family with these labels. */
export function samplesOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}) {
  return (families.get(name)?.metrics ?? []).filter((m) => matches(m.labels, labels));
}
