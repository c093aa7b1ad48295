/**
 * A minimal Prometheus registry (text exposition format 0.0.4). Written here rather than
 * pulled in: Holdfast needs counters, gauges and histograms and nothing else.
 */
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import { HoldfastError } from '../errors.js';

/** Label name -> value. */
export type Labels = Readonly<Record<string, string>>;
/** One labelled value, as returned by a gauge's collect callback. */
export interface GaugeSample {
  readonly labels: Labels;
  readonly value: number;
}
/** A monotonically increasing count. */
export interface Counter {
  /** Adds `by` (default 1, must be >= 0) to the series with these labels. */
  inc(labels?: Labels, by?: number): void;
}
/** A value that goes up and down. */
export interface Gauge {
  set(labels: Labels, value: number): void;
}
/** Observations counted into fixed buckets. */
export interface Histogram {
  observe(labels: Labels, value: number): void;
}

/** `Content-Type` of {@link Metrics.render}'s output. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
/** Series per metric; past it a label is carrying ids and would exhaust the scraper. */
export const MAX_SERIES_PER_METRIC = 10_000;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

type Kind = 'counter' | 'gauge' | 'histogram';
interface Family {
  readonly name: string;
  readonly help: string;
  readonly kind: Kind;
  /** Sample lines without trailing newlines. */
  lines(): string[];
}

/** A registry of metrics. Names are unique per registry; registering one twice throws. */
export class Metrics {
  readonly #families = new Map<string, Family>();

  /** Registers a counter; by convention its name ends in `_total`. */
  counter(name: string, help: string): Counter {
    const series = new SeriesMap<{ value: number }>(name);
    this.#register({
      name,
      help,
      kind: 'counter',
      lines: () => series.list().map(({ labels, state }) => sample(name, labels, state.value)),
    });
    return {
      inc: (labels = {}, by = 1) => {
        if (!(by >= 0)) throw invalid(`counter ${name} can only increase; got ${by}`);
        series.get(labels, () => ({ value: 0 })).value += by;
      },
    };
  }

  /**
   * Registers a gauge. `collect`, when given, is called on every render and its samples
   * are rendered after (and override) values set with `set`; if it throws, render throws.
   */
  gauge(name: string, help: string, collect?: () => readonly GaugeSample[]): Gauge {
    const series = new SeriesMap<{ value: number }>(name);
    const lines = (): string[] => {
      const current = new SeriesMap<{ value: number }>(name);
      const entries: GaugeSample[] = [
        ...series.list().map(({ labels, state }) => ({ labels, value: state.value })),
        ...(collect?.() ?? []),
      ];
      for (const { labels, value } of entries) {
        current.get(labels, () => ({ value: 0 })).value = value;
      }
      return current.list().map(({ labels, state }) => sample(name, labels, state.value));
    };
    this.#register({ name, help, kind: 'gauge', lines });
    return {
      set: (labels, value) => {
        series.get(labels, () => ({ value: 0 })).value = value;
      },
    };
  }

  /** Registers a histogram with strictly increasing finite upper bounds; `+Inf` is implicit. */
  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    if (buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= (buckets[i - 1] ?? b)))) {
      throw invalid(`histogram ${name} buckets must be finite and strictly increasing`);
    }
    const bounds = [...buckets];
    const series = new SeriesMap<{ counts: number[]; sum: number; count: number }>(name, ['le']);
    const lines = (): string[] =>
      series.list().flatMap(({ labels, state: s }) => {
        let cumulative = 0;
        const out = bounds.map((bound, i) => {
          cumulative += s.counts[i] ?? 0;
          return sample(`${name}_bucket`, { ...labels, le: formatNumber(bound) }, cumulative);
        });
        out.push(sample(`${name}_bucket`, { ...labels, le: '+Inf' }, s.count));
        out.push(sample(`${name}_sum`, labels, s.sum), sample(`${name}_count`, labels, s.count));
        return out;
      });
    this.#register({ name, help, kind: 'histogram', lines });
    return {
      observe: (labels, value) => {
        if (Number.isNaN(value)) throw invalid(`histogram ${name} cannot observe NaN`);
        const s = series.get(labels, () => ({ counts: bounds.map(() => 0), sum: 0, count: 0 }));
        const index = bounds.findIndex((bound) => value <= bound);
        if (index >= 0) s.counts[index] = (s.counts[index] ?? 0) + 1;
        s.sum += value;
        s.count += 1;
      },
    };
  }

  /** All metrics in registration order, series in first-use order; ends with a newline. */
  render(): string {
    let out = '';
    for (const family of this.#families.values()) {
      out += `# HELP ${family.name} ${escapeHelp(family.help)}\n# TYPE ${family.name} ${family.kind}\n`;
      for (const line of family.lines()) out += `${line}\n`;
    }
    return out;
  }

  #register(family: Family): void {
    if (!METRIC_NAME.test(family.name)) throw invalid(`invalid metric name ${JSON.stringify(family.name)}`);
    if (this.#families.has(family.name)) {
      throw new HoldfastError('ALREADY_EXISTS', `metric ${family.name} is already registered`, { data: { name: family.name } });
    }
    this.#families.set(family.name, family);
  }
}

/** Series of one metric keyed by their sorted label set; label names are checked once per series. */
class SeriesMap<T> {
  readonly #series = new Map<string, { labels: Labels; state: T }>();
  constructor(
    readonly metric: string,
    readonly reserved: readonly string[] = [],
  ) {}

  get(labels: Labels, create: () => T): T {
    const sorted = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const key = JSON.stringify(sorted);
    const found = this.#series.get(key);
    if (found !== undefined) return found.state;
    for (const [name] of sorted) {
      if (!LABEL_NAME.test(name) || name.startsWith('__') || this.reserved.includes(name)) {
        throw invalid(`invalid label name ${JSON.stringify(name)} on metric ${this.metric}`);
      }
    }
    if (this.#series.size >= MAX_SERIES_PER_METRIC) {
      throw new HoldfastError('LIMIT_EXCEEDED', `metric ${this.metric} exceeds ${MAX_SERIES_PER_METRIC} series: a label holds ids`, {
        data: { metric: this.metric, limit: MAX_SERIES_PER_METRIC },
      });
    }
    const state = create();
    this.#series.set(key, { labels: Object.fromEntries(sorted), state });
    return state;
  }

  /** Series in first-use order. */
  list(): Array<{ labels: Labels; state: T }> {
    return [...this.#series.values()];
  }
}

function sample(name: string, labels: Labels, value: number): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return `${name}${pairs.length > 0 ? `{${pairs.join(',')}}` : ''} ${formatNumber(value)}`;
}

function formatNumber(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function invalid(message: string): HoldfastError {
  return new HoldfastError('INVALID_INPUT', message);
}

/** Upper bounds of HTTP request durations; long tails are archive downloads and uploads. */
export const HTTP_DURATION_BUCKETS_SECONDS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Middleware counting `holdfast_http_requests_total{method,route,status}` and observing
 * `holdfast_http_request_duration_seconds{method,route}`. `route` is the pattern that
 * answered (`/v1/runs/:id`), so ids never become labels. Duration ends when the handler
 * returns its Response, before a streamed body has been sent. Registers both metrics, so
 * call it once per registry.
 */
export function httpMetrics(metrics: Metrics): MiddlewareHandler {
  const requests = metrics.counter('holdfast_http_requests_total', 'HTTP requests answered, by method, route pattern and status.');
  const duration = metrics.histogram(
    'holdfast_http_request_duration_seconds',
    'Time to produce an HTTP response, by method and route pattern.',
    HTTP_DURATION_BUCKETS_SECONDS,
  );
  return async (c, next) => {
    const started = performance.now();
    await next();
    const labels = { method: c.req.method, route: routePath(c) };
    requests.inc({ ...labels, status: String(c.res.status) });
    duration.observe(labels, (performance.now() - started) / 1000);
  };
}
