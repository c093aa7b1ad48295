import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { httpMetrics, Metrics } from './metrics.js';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isHoldfastError(error) ? error.code : 'not a HoldfastError';
  }
  return undefined;
}

describe('Metrics.render', () => {
  it('renders counters, gauges and histograms in exposition format 0.0.4', () => {
    const metrics = new Metrics();
    const requests = metrics.counter('app_requests_total', 'Requests.\nSecond line with \\ backslash.');
    requests.inc();
    requests.inc({ route: '/a"b\\c\nd', method: 'GET' }, 2);
    requests.inc({ method: 'GET', route: '/a"b\\c\nd' });
    const queue = metrics.gauge('app_queue_depth', 'Jobs waiting.', () => [{ labels: { queue: 'gc' }, value: 7 }]);
    queue.set({ queue: 'upload' }, 3);
    queue.set({ queue: 'gc' }, 1);
    const latency = metrics.histogram('app_latency_seconds', 'Latency.', [0.1, 1]);
    latency.observe({}, 0.05);
    latency.observe({}, 0.5);
    latency.observe({}, 4);
    metrics.counter('app_unused_total', 'Never incremented.');

    expect(metrics.render()).toBe(
      [
        '# HELP app_requests_total Requests.\\nSecond line with \\\\ backslash.',
        '# TYPE app_requests_total counter',
        'app_requests_total 1',
        'app_requests_total{method="GET",route="/a\\"b\\\\c\\nd"} 3',
        '# HELP app_queue_depth Jobs waiting.',
        '# TYPE app_queue_depth gauge',
        'app_queue_depth{queue="upload"} 3',
        'app_queue_depth{queue="gc"} 7',
        '# HELP app_latency_seconds Latency.',
        '# TYPE app_latency_seconds histogram',
        'app_latency_seconds_bucket{le="0.1"} 1',
        'app_latency_seconds_bucket{le="1"} 2',
        'app_latency_seconds_bucket{le="+Inf"} 3',
        'app_latency_seconds_sum 4.55',
        'app_latency_seconds_count 3',
        '# HELP app_unused_total Never incremented.',
        '# TYPE app_unused_total counter',
        '',
      ].join('\n'),
    );
  });

  it('renders special values and an empty registry', () => {
    const metrics = new Metrics();
    expect(metrics.render()).toBe('');
    const gauge = metrics.gauge('g', 'G.');
    gauge.set({ k: 'inf' }, Number.POSITIVE_INFINITY);
    gauge.set({ k: 'nan' }, Number.NaN);
    expect(metrics.render()).toBe('# HELP g G.\n# TYPE g gauge\ng{k="inf"} +Inf\ng{k="nan"} NaN\n');
  });
});

describe('Metrics validation', () => {
  it('rejects bad metric and label names with INVALID_INPUT', () => {
    const metrics = new Metrics();
    expect(codeOf(() => metrics.counter('1bad', 'x'))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.counter('has-dash', 'x'))).toBe('INVALID_INPUT');
    const counter = metrics.counter('ok_total', 'x');
    expect(codeOf(() => counter.inc({ 'bad-label': 'v' }))).toBe('INVALID_INPUT');
    expect(codeOf(() => counter.inc({ __reserved: 'v' }))).toBe('INVALID_INPUT');
    expect(codeOf(() => counter.inc({}, -1))).toBe('INVALID_INPUT');
    const histogram = metrics.histogram('h_seconds', 'x', [1]);
    expect(codeOf(() => histogram.observe({ le: '1' }, 1))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.histogram('h2', 'x', [1, 1]))).toBe('INVALID_INPUT');
    expect(codeOf(() => metrics.histogram('h3', 'x', [Number.POSITIVE_INFINITY]))).toBe('INVALID_INPUT');
  });

  it('rejects a second metric with the same name', () => {
    const metrics = new Metrics();
    metrics.gauge('dup', 'x');
    expect(codeOf(() => metrics.counter('dup', 'x'))).toBe('ALREADY_EXISTS');
  });
});

describe('httpMetrics', () => {
  it('labels requests by route pattern, not by path', async () => {
    const metrics = new Metrics();
    const app = new Hono();
    app.use('*', httpMetrics(metrics));
    app.get('/v1/runs/:id', (c) => c.json({ id: c.req.param('id') }));
    await app.request('/v1/runs/a');
    await app.request('/v1/runs/b');
    await app.request('/nowhere');
    const text = metrics.render();
    expect(text).toContain('holdfast_http_requests_total{method="GET",route="/v1/runs/:id",status="200"} 2\n');
    expect(text).toContain('holdfast_http_requests_total{method="GET",route="/*",status="404"} 1\n');
    expect(text).toContain('holdfast_http_request_duration_seconds_count{method="GET",route="/v1/runs/:id"} 2\n');
    expect(text).toContain('holdfast_http_request_duration_seconds_bucket{method="GET",route="/v1/runs/:id",le="+Inf"} 2\n');
    expect(text).not.toContain('/v1/runs/a');
  });
});
