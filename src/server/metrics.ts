/**
 * A small Prometheus registry written for the HTTP servers: counters, gauges and
 * histograms with labels, rendered in the text exposition format (version 0.0.4):
 *
 *   # HELP name help text
 *   # TYPE name counter|gauge|histogram
 *   name{label="value"} 42
 *   name_bucket{le="0.005"} 3 ... name_bucket{le="+Inf"} n, name_sum s, name_count n
 *
 * Label values are escaped (backslash, double quote, newline) as the format requires.
 */

export type Labels = Readonly<Record<string, string>>;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labelKey(labels: Labels | undefined): string {
  if (!labels) return '';
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return '';
  return '{' + keys.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',') + '}';
}

function withLabel(key: string, extra: string): string {
  if (key === '') return `{${extra}}`;
  return key.slice(0, -1) + ',' + extra + '}';
}

function fmtNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  return String(n);
}

interface Metric {
  readonly name: string;
  readonly help: string;
  render(): string;
}

export class Counter implements Metric {
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels?: Labels, by = 1): void {
    const k = labelKey(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels?: Labels): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    if (this.values.size === 0) lines.push(`${this.name} 0`);
    for (const [k, v] of this.values) lines.push(`${this.name}${k} ${fmtNumber(v)}`);
    return lines.join('\n');
  }
}

export class Gauge implements Metric {
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  set(value: number, labels?: Labels): void {
    this.values.set(labelKey(labels), value);
  }
  get(labels?: Labels): number | undefined {
    return this.values.get(labelKey(labels));
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k} ${fmtNumber(v)}`);
    return lines.join('\n');
  }
}

/** Default latency buckets in seconds (0.5 ms … 10 s). */
export const LATENCY_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface HistogramSeries {
  counts: Float64Array;
  sum: number;
  count: number;
}

export class Histogram implements Metric {
  private readonly series = new Map<string, HistogramSeries>();
  readonly buckets: readonly number[];
  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[] = LATENCY_BUCKETS,
  ) {
    const sorted = [...buckets].sort((a, b) => a - b);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i] === sorted[i - 1]) throw new Error(`histogram ${name}: duplicate bucket ${sorted[i]}`);
    }
    this.buckets = sorted;
  }
  observe(value: number, labels?: Labels): void {
    const k = labelKey(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { counts: new Float64Array(this.buckets.length), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    // Non-cumulative per bucket; rendering accumulates.
    for (let i = 0; i < this.buckets.length; i++) {
      if (value <= this.buckets[i]) {
        s.counts[i]++;
        break;
      }
    }
    s.sum += value;
    s.count++;
  }
  count(labels?: Labels): number {
    return this.series.get(labelKey(labels))?.count ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [k, s] of this.series) {
      let acc = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        acc += s.counts[i];
        lines.push(`${this.name}_bucket${withLabel(k, `le="${fmtNumber(this.buckets[i])}"`)} ${acc}`);
      }
      lines.push(`${this.name}_bucket${withLabel(k, 'le="+Inf"')} ${s.count}`);
      lines.push(`${this.name}_sum${k} ${fmtNumber(s.sum)}`);
      lines.push(`${this.name}_count${k} ${s.count}`);
    }
    return lines.join('\n');
  }
}

export class Registry {
  private readonly metrics: Metric[] = [];
  private register<M extends Metric>(m: M): M {
    if (this.metrics.some((x) => x.name === m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.metrics.push(m);
    return m;
  }
  counter(name: string, help: string): Counter {
    return this.register(new Counter(name, help));
  }
  gauge(name: string, help: string): Gauge {
    return this.register(new Gauge(name, help));
  }
  histogram(name: string, help: string, buckets?: readonly number[]): Histogram {
    return this.register(new Histogram(name, help, buckets));
  }
  /** The whole registry in the Prometheus text format (ends with a newline). */
  render(): string {
    return this.metrics.map((m) => m.render()).join('\n') + '\n';
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** The metrics both HTTP servers record. */
export interface ServerMetrics {
  registry: Registry;
  requests: Counter;
  latency: Histogram;
  cacheHits: Counter;
  cacheMisses: Counter;
  fallbacks: Counter;
  reloads: Counter;
  servedGeneration: Gauge;
}

export function createServerMetrics(): ServerMetrics {
  const registry = new Registry();
  return {
    registry,
    requests: registry.counter('cogr_http_requests_total', 'HTTP requests by route, method and status code.'),
    latency: registry.histogram('cogr_http_request_duration_seconds', 'HTTP request latency in seconds by route.'),
    cacheHits: registry.counter('cogr_query_keyword_cache_hits_total', 'Query keyword look-ups answered from the cache.'),
    cacheMisses: registry.counter('cogr_query_keyword_cache_misses_total', 'Query keyword look-ups that ran the generator.'),
    fallbacks: registry.counter(
      'cogr_query_keyword_fallbacks_total',
      'Searches that fell back to the raw query as the only keyword, by reason.',
    ),
    reloads: registry.counter('cogr_generation_reloads_total', 'Attempts to load the newest generation, by outcome.'),
    servedGeneration: registry.gauge('cogr_served_generation', 'The generation being served, by side.'),
  };
}
