import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { httpMetrics, MAX_SERIES_PER_METRIC, Metrics, UNCONVENTIONAL_DEFAULT_METRICS } from './metrics.js';

/** Sample value as the Prometheus text parser reads it (Go's ParseFloat, plus the format's infinities). */
const VALUE = /^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (\S+)$/;

/**
 * What `promtool check metrics` would refuse in `text` (text format 0.0.4): malformed lines,
 * samples of a family with no `# TYPE` before them, a family declared twice, histogram
 * buckets that decrease or whose `+Inf` bucket is not `_count`. Empty when valid.
 */
function exposition(text: string): string[] {
  const problems: string[] = [];
  const types = new Map<string, string>();
  const buckets = new Map<string, number>();
  const infs = new Map<string, number>();
  const counts = new Map<string, number>();
  if (!text.endsWith('\n') && text !== '') problems.push('no final newline');
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta !== null) {
      if (meta[1] === 'TYPE') {
        if (types.has(meta[2] ?? '')) problems.push(`family declared twice: ${line}`);
        if (!/^(counter|gauge|histogram|summary|untyped)$/.test(meta[3] ?? '')) problems.push(`bad type: ${line}`);
        types.set(meta[2] ?? '', meta[3] ?? '');
      }
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (sample === null || !VALUE.test(sample[3] ?? '')) {
      problems.push(`malformed: ${line}`);
      continue;
    }
    const name = sample[1] ?? '';
    const family = [name, name.replace(/_(bucket|sum|count)$/, '')].find((n) => types.has(n));
    if (family === undefined) problems.push(`no TYPE for ${name}`);
    if (family !== undefined && types.get(family) === 'histogram' && family !== name) {
      const labels = [...(sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
        .filter((m) => m[1] !== 'le')
        .map((m) => m[0])
        .sort()
        .join(',');
      const series = `${family}{${labels}}`;
      const value = Number(sample[3]);
      if (name.endsWith('_bucket')) {
        if (value < (buckets.get(series) ?? 0)) problems.push(`decreasing bucket: ${line}`);
        buckets.set(series, value);
        if ((sample[2] ?? '').includes('le="+Inf"')) infs.set(series, value);
      } else if (name.endsWith('_count')) counts.set(series, value);
    }
  }
  for (const [series, count] of counts) if (infs.get(series) !== count) problems.push(`+Inf bucket is not _count for ${series}`);
  return problems;
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isHoldfastError(error) ? error.code : 'not a HoldfastError';
  }
  return undefined;
}

describe('Metrics.render', () => {
  it('renders counters, gauges and histograms in exposition format 0.0.4', async () => {
    const metrics = new Metrics({ processMetrics: false });
    const requests = metrics.counter('app_requests_total', 'Requests.\nSecond line with \\ backslash.', ['method', 'route']);
    requests.inc();
    requests.inc({ route: '/a"b\\c\nd', method: 'GET' }, 2);
    requests.inc({ method: 'GET', route: '/a"b\\c\nd' });
    const queue = metrics.gauge('app_queue_depth', 'Jobs waiting.', ['queue'], () => [{ labels: { queue: 'gc' }, value: 7 }]);
    queue.set({ queue: 'upload' }, 3);
    queue.set({ queue: 'gc' }, 1);
    const latency = metrics.histogram('app_latency_seconds', 'Latency.', [0.1, 1]);
    latency.observe({}, 0.05);
    latency.observe({}, 0.5);
    latency.observe({}, 4);
    metrics.counter('app_unused_total', 'Never incremented.', ['kind']);

    const text = await metrics.render();
    expect(text).toBe(
      [
        '# HELP app_requests_total Requests.\\nSecond line with \\\\ backslash.',
        '# TYPE app_requests_total counter',
        'app_requests_total 1',
        'app_requests_total{method="GET",route="/a\\"b\\\\c\\nd"} 3',
        '',
        '# HELP app_queue_depth Jobs waiting.',
        '# TYPE app_queue_depth gauge',
        'app_queue_depth{queue="upload"} 3',
        'app_queue_depth{queue="gc"} 7',
        '',
        '# HELP app_latency_seconds Latency.',
        '# TYPE app_latency_seconds histogram',
        'app_latency_seconds_bucket{le="0.1"} 1',
        'app_latency_seconds_bucket{le="1"} 2',
        'app_latency_seconds_bucket{le="+Inf"} 3',
        'app_latency_seconds_sum 4.55',
        'app_latency_seconds_count 3',
        '',
        '# HELP app_unused_total Never incremented.',
        '# TYPE app_unused_total counter',
        '',
      ].join('\n'),
    );
    expect(exposition(text)).toEqual([]);
  });

  it('renders an empty registry as no family, and infinite values as +Inf', async () => {
    const metrics = new Metrics({ processMetrics: false });
    expect((await metrics.render()).trim()).toBe('');
    metrics.gauge('g', 'G.', ['k']).set({ k: 'inf' }, Number.POSITIVE_INFINITY);
    expect(await metrics.render()).toBe('# HELP g G.\n# TYPE g gauge\ng{k="inf"} +Inf\n');
  });
});

describe('process and runtime metrics', () => {
  it('carries the standard process and Node.js metrics, non-zero where a live process cannot read zero, in valid exposition', async () => {
    const metrics = new Metrics();
    metrics.counter('holdfast_probe_total', 'Probe.').inc();
    // Allocate enough short-lived garbage for the young generation to be collected at least once.
    let kept = 0;
    for (let i = 0; i < 200_000; i++) kept += new Array(16).fill(i).length;
    expect(kept).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const text = await metrics.render();
    expect(exposition(text)).toEqual([]);
    const value = (name: string): number => {
      const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
      if (line === undefined) throw new Error(`${name} missing from /metrics`);
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    for (const name of [
      'process_resident_memory_bytes',
      'process_heap_bytes',
      'process_cpu_seconds_total',
      'process_cpu_user_seconds_total',
      'process_open_fds',
      'process_max_fds',
      'nodejs_heap_size_used_bytes',
      'nodejs_heap_size_total_bytes',
    ]) {
      expect(value(name), name).toBeGreaterThan(0);
    }
    const startedS = Date.now() / 1000 - process.uptime();
    expect(Math.abs(value('process_start_time_seconds') - startedS)).toBeLessThan(5);
    expect(value('nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(value('nodejs_eventloop_lag_max_seconds')).toBeGreaterThan(0);
    // prom-client's `_total` gauges are left out: the exposition format keeps `_total` for counters.
    for (const name of UNCONVENTIONAL_DEFAULT_METRICS) expect(text).not.toContain(name);
    expect(text).toMatch(/^# TYPE nodejs_active_handles gauge$/m);
    expect(text).toMatch(/^# TYPE nodejs_gc_duration_seconds histogram$/m);
    const gcCount = [...text.matchAll(/^nodejs_gc_duration_seconds_count\{kind="[a-z]+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    expect(gcCount).toBeGreaterThan(0);
    expect(value('holdfast_probe_total')).toBe(1);
  });
});

describe('Metrics validation', () => {
  it('rejects bad metric and label names with INVALID_INPUT', () => {
    const metrics = new Metrics({ processMetrics: false });
    expect(codeOf(() => metrics.counter('1bad', 'x'))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.counter('has-dash', 'x'))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.counter('bad_label_total', 'x', ['bad-label']))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.counter('reserved_total', 'x', ['__reserved']))).toBe('INVALID_INPUT');
    const counter = metrics.counter('ok_total', 'x', ['kind']);
    expect(codeOf(() => counter.inc({ undeclared: 'v' }))).toBe('INVALID_INPUT');
    expect(codeOf(() => counter.inc({}, -1))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.histogram('h_seconds', 'x', [1], ['le']))).toBe('INVALID_INPUT');
    const histogram = metrics.histogram('h1_seconds', 'x', [1]);
    expect(codeOf(() => histogram.observe({ le: '1' }, 1))).toBe('INVALID_INPUT');
    expect(codeOf(() => histogram.observe({}, Number.NaN))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.histogram('h2', 'x', [1, 1]))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.histogram('h3', 'x', [Number.POSITIVE_INFINITY]))).toBe('INVALID_INPUT');
  });

  it('refuses a label set past MAX_SERIES_PER_METRIC with LIMIT_EXCEEDED', () => {
    const counter = new Metrics({ processMetrics: false }).counter('ids_total', 'x', ['id']);
    for (let i = 0; i < MAX_SERIES_PER_METRIC; i++) counter.inc({ id: String(i) });
    expect(codeOf(() => counter.inc({ id: '0' }))).toBeUndefined();
    expect(codeOf(() => counter.inc({ id: 'one more' }))).toBe('LIMIT_EXCEEDED');
  });

  it('rejects a second metric with the same name', () => {
    const metrics = new Metrics({ processMetrics: false });
    metrics.gauge('dup', 'x');
    expect(codeOf(() => metrics.counter('dup', 'x'))).toBe('ALREADY_EXISTS');
  });
});

describe('httpMetrics', () => {
  it('labels requests by route pattern, not by path', async () => {
    const metrics = new Metrics({ processMetrics: false });
    const app = new Hono();
    app.use('*', httpMetrics(metrics));
    app.get('/v1/runs/:id', (c) => c.json({ id: c.req.param('id') }));
    await app.request('/v1/runs/a');
    await app.request('/v1/runs/b');
    await app.request('/nowhere');
    const text = await metrics.render();
    expect(text).toContain('holdfast_http_requests_total{method="GET",route="/v1/runs/:id",status="200"} 2\n');
    expect(text).toContain('holdfast_http_requests_total{method="GET",route="/*",status="404"} 1\n');
    expect(text).toContain('holdfast_http_request_duration_seconds_count{method="GET",route="/v1/runs/:id"} 2\n');
    expect(text).toContain('holdfast_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/v1/runs/:id"} 2\n');
    expect(text).not.toContain('/v1/runs/a');
  });
});
