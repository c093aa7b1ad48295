/**
 * The Prometheus registry of the service: a thin facade over prom-client, which also gives the
 * standard process and runtime metrics dashboards expect (`process_resident_memory_bytes`,
 * `process_cpu_seconds_total`, `process_start_time_seconds`, `process_open_fds`,
 * `nodejs_heap_size_used_bytes`, `nodejs_eventloop_lag_seconds`, `nodejs_active_handles`,
 * `nodejs_gc_duration_seconds`, …) under their usual names (but the three `_total` gauges, see
 * {@link UNCONVENTIONAL_DEFAULT_METRICS}). prom-client replaced a hand-written
 * registry: it is the library those names come from, and what it does (GC observation,
 * event-loop delay histograms, /proc readings) is better owned there. The facade keeps
 * Holdfast's rules on top: errors are HoldfastErrors with codes, label names are declared
 * with the metric, and a metric's series are bounded.
 */
import type { MiddlewareHandler } from 'hono';
import { matchedRoutes, routePath } from 'hono/route';
import { collectDefaultMetrics, Counter as PromCounter, Gauge as PromGauge, Histogram as PromHistogram, Registry } from 'prom-client';
import { ConflictError, type HoldfastError, InputError } from '../errors.js';
import type { UnsavedSince } from '../folders/sandbox-sync.js';
import { CHECKPOINT_REASONS } from '../metadata/schema.js';
import type { RunLogEvent } from '../runs/run-log-event.js';

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

/** Options of {@link Metrics}. */
export interface MetricsOptions {
  /**
   * Whether the registry carries the process and runtime metrics (prom-client's default
   * metrics); default true. Off for registries whose exact output a test compares.
   */
  readonly processMetrics?: boolean;
}

/** `Content-Type` of {@link Metrics.render}'s output. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
/** Series per metric; past it a label is carrying ids and would exhaust the scraper. */
export const MAX_SERIES_PER_METRIC = 10_000;
/** Upper bounds of `nodejs_gc_duration_seconds`: minor collections take well under 1 ms, full ones up to seconds. */
export const GC_DURATION_BUCKETS_SECONDS: readonly number[] = [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5];
/**
 * prom-client's default gauges whose names end in `_total`, which the exposition format keeps for
 * counters (`promtool check metrics` flags them): left out. Their per-type gauges
 * (`nodejs_active_handles{type}`, …) stay, and `sum()` of one gives its total.
 */
export const UNCONVENTIONAL_DEFAULT_METRICS: readonly string[] = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * A registry of metrics. Names are unique per registry (a second registration is
 * `ALREADY_EXISTS`); each metric declares its label names, and a sample with another label is
 * `INVALID_INPUT`.
 */
export class Metrics {
  /** The prom-client registry underneath, for callers that add prom-client metrics themselves. */
  readonly registry = new Registry();

  constructor(options: MetricsOptions = {}) {
    if (options.processMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, gcDurationBuckets: [...GC_DURATION_BUCKETS_SECONDS] });
      for (const name of UNCONVENTIONAL_DEFAULT_METRICS) this.registry.removeSingleMetric(name);
    }
  }

  /** Registers a counter; by convention its name ends in `_total`. */
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    const guard = this.#guard(name, labelNames, []);
    const counter = new PromCounter({ name, help, labelNames: [...labelNames], registers: [this.registry] });
    return {
      inc: (labels = {}, by = 1) => {
        if (!(by >= 0)) throw invalid(`counter ${name} can only increase; got ${by}`);
        counter.inc(guard(labels), by);
      },
    };
  }

  /**
   * Registers a gauge. `collect`, when given, is called on every render and its samples
   * override values set with `set`; if it throws, render rejects.
   */
  gauge(name: string, help: string, labelNames: readonly string[] = [], collect?: () => readonly GaugeSample[]): Gauge {
    const guard = this.#guard(name, labelNames, []);
    const gauge: PromGauge = new PromGauge({
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      ...(collect === undefined
        ? {}
        : {
            collect() {
              for (const { labels, value } of collect()) gauge.set(guard(labels), value);
            },
          }),
    });
    return { set: (labels, value) => gauge.set(guard(labels), value) };
  }

  /** Registers a histogram with strictly increasing finite upper bounds; `+Inf` is implicit. */
  histogram(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []): Histogram {
    if (buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= (buckets[i - 1] ?? b)))) {
      throw invalid(`histogram ${name} buckets must be finite and strictly increasing`);
    }
    const guard = this.#guard(name, labelNames, ['le']);
    const histogram = new PromHistogram({ name, help, labelNames: [...labelNames], buckets: [...buckets], registers: [this.registry] });
    return {
      observe: (labels, value) => {
        if (Number.isNaN(value)) throw invalid(`histogram ${name} cannot observe NaN`);
        histogram.observe(guard(labels), value);
      },
    };
  }

  /** Every metric in the text exposition format 0.0.4 ({@link PROMETHEUS_CONTENT_TYPE}). */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * Checks a new metric's name and label names, and returns the check of each sample's
   * labels: only declared names, at most {@link MAX_SERIES_PER_METRIC} label sets.
   */
  #guard(name: string, labelNames: readonly string[], reserved: readonly string[]): (labels: Labels) => Record<string, string> {
    if (!METRIC_NAME.test(name)) throw invalid(`invalid metric name ${JSON.stringify(name)}`);
    if (this.registry.getSingleMetric(name) !== undefined) {
      throw new ConflictError('ALREADY_EXISTS', `metric ${name} is already registered`, { data: { name } });
    }
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__') || reserved.includes(label)) {
        throw invalid(`invalid label name ${JSON.stringify(label)} on metric ${name}`);
      }
    }
    const seen = new Set<string>();
    return (labels) => {
      for (const label of Object.keys(labels)) {
        if (!labelNames.includes(label)) throw invalid(`metric ${name} has no label ${JSON.stringify(label)}: declare it with the metric`);
      }
      const key = JSON.stringify(labelNames.map((l) => labels[l] ?? null));
      if (!seen.has(key)) {
        if (seen.size >= MAX_SERIES_PER_METRIC) {
          throw new InputError('LIMIT_EXCEEDED', `metric ${name} exceeds ${MAX_SERIES_PER_METRIC} series: a label holds ids`, {
            data: { metric: name, limit: MAX_SERIES_PER_METRIC },
          });
        }
        seen.add(key);
      }
      // Sorted, so a series reads the same whatever order a caller wrote its labels in.
      return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    };
  }
}

function invalid(message: string): HoldfastError {
  return new InputError('INVALID_INPUT', message);
}

/**
 * The route pattern a request is labelled with: the route registered for its method that
 * matched (`/v1/runs/:id`), also when a middleware in front of it answered (an idempotent
 * replay or refusal, a 401, a 413), so one route's answers are one series. Requests no route
 * matched keep the pattern of whatever answered (`/*`).
 */
function routeLabel(c: Parameters<MiddlewareHandler>[0]): string {
  // app.use() middleware is registered for every method ('ALL'); routes for theirs.
  const route = matchedRoutes(c).findLast((r) => r.method !== 'ALL');
  return route?.path ?? routePath(c);
}

/** Upper bounds of HTTP request durations; long tails are archive downloads and uploads. */
export const HTTP_DURATION_BUCKETS_SECONDS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Middleware counting `holdfast_http_requests_total{method,route,status}` and observing
 * `holdfast_http_request_duration_seconds{method,route}`. `route` is the route's pattern
 * (`/v1/runs/:id`, see routeLabel), so ids never become labels. Duration ends when the handler
 * returns its Response, before a streamed body has been sent. Registers both metrics, so
 * call it once per registry.
 */
export function httpMetrics(metrics: Metrics): MiddlewareHandler {
  const requests = metrics.counter('holdfast_http_requests_total', 'HTTP requests answered, by method, route pattern and status.', [
    'method',
    'route',
    'status',
  ]);
  const duration = metrics.histogram(
    'holdfast_http_request_duration_seconds',
    'Time to produce an HTTP response, by method and route pattern.',
    HTTP_DURATION_BUCKETS_SECONDS,
    ['method', 'route'],
  );
  return async (c, next) => {
    const started = performance.now();
    await next();
    const labels = { method: c.req.method, route: routeLabel(c) };
    requests.inc({ ...labels, status: String(c.res.status) });
    duration.observe(labels, (performance.now() - started) / 1000);
  };
}

/** Upper bounds of checkpoint and restore durations: a small workspace takes well under a second, a large one minutes. */
export const SNAPSHOT_DURATION_BUCKETS_SECONDS: readonly number[] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600];
/** Upper bounds of GC sweep durations: a sweep lists the store and marks every live object. */
export const GC_SWEEP_DURATION_BUCKETS_SECONDS: readonly number[] = [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

/** What {@link engineMetrics} reads: the run events bus and the work-folder sync's save ages. */
export interface EngineMetricsSource {
  onRunEvent(listener: (event: RunLogEvent) => void): () => void;
  readonly folderSync: { unsavedSince(): UnsavedSince };
}

/**
 * Registers the engine's families, fed from the run events bus (`checkpoint_finished`,
 * `restore_finished`, `gc_sweep_finished`, `lease_taken_over`, `lease_lost`,
 * `work_folder_save_failed`) and the work-folder sync's save ages, plus
 * `holdfast_build_info{version,node}`. Every label is from a closed set (reason, outcome,
 * error code, scope), never an id, tenant name or path: see the README's metrics table for
 * each family's bound. Labelled series of the known reasons, outcomes and scopes start at 0.
 * Call it once per registry.
 */
export function engineMetrics(metrics: Metrics, source: EngineMetricsSource, version: string): void {
  metrics
    .gauge('holdfast_build_info', 'Always 1; the labels say which Holdfast and Node.js this process runs.', ['version', 'node'])
    .set({ version, node: process.version }, 1);

  const checkpoints = metrics.counter('holdfast_checkpoints_total', 'Checkpoints finished, by reason and outcome (ready, failed).', [
    'reason',
    'outcome',
  ]);
  const checkpointSeconds = metrics.histogram(
    'holdfast_checkpoint_duration_seconds',
    'Time a checkpoint took, by reason and outcome.',
    SNAPSHOT_DURATION_BUCKETS_SECONDS,
    ['reason', 'outcome'],
  );
  const checkpointBytesNew = metrics.counter(
    'holdfast_checkpoint_bytes_new_total',
    'Raw bytes of objects ready checkpoints stored anew (what deduplication did not find), by reason.',
    ['reason'],
  );
  const checkpointFiles = metrics.counter('holdfast_checkpoint_files_total', 'Files in ready checkpoints, by reason.', ['reason']);
  const checkpointFailures = metrics.counter('holdfast_checkpoint_failures_total', 'Failed checkpoints, by reason and error code.', [
    'reason',
    'code',
  ]);
  const checkpointScans = metrics.counter(
    'holdfast_checkpoint_scans_total',
    'Ready checkpoints by how their source scanned: delta (only what changed was read), full, or unknown (the source does not say).',
    ['mode'],
  );
  const watchMissed = metrics.counter(
    'holdfast_agent_watch_missed_total',
    "Directories verifying scans found changed though a sandbox agent's watches had not told (0 unless a change raised no event).",
  );
  for (const mode of ['delta', 'full', 'unknown']) checkpointScans.inc({ mode }, 0);
  watchMissed.inc({}, 0);
  for (const reason of CHECKPOINT_REASONS) {
    for (const outcome of ['ready', 'failed']) checkpoints.inc({ reason, outcome }, 0);
    checkpointBytesNew.inc({ reason }, 0);
    checkpointFiles.inc({ reason }, 0);
  }

  const restores = metrics.counter(
    'holdfast_restores_total',
    'Restores finished (every restore, not only recoveries), by outcome (ok, failed).',
    ['outcome'],
  );
  const restoreSeconds = metrics.histogram(
    'holdfast_restore_duration_seconds',
    'Time a restore took, by outcome.',
    SNAPSHOT_DURATION_BUCKETS_SECONDS,
    ['outcome'],
  );
  const restoreBytes = metrics.counter('holdfast_restore_bytes_fetched_total', 'Bytes restores fetched from the blob store.');
  const restoreFailures = metrics.counter('holdfast_restore_failures_total', 'Failed restores, by error code.', ['code']);
  for (const outcome of ['ok', 'failed']) restores.inc({ outcome }, 0);

  const takeovers = metrics.counter('holdfast_lease_takeovers_total', "Run leases this process claimed after another owner's expired.");
  const lost = metrics.counter('holdfast_leases_lost_total', 'Run leases this process held and found taken over at a heartbeat.');

  metrics.gauge(
    'holdfast_work_folder_unsaved_age_seconds',
    'Per scope, the age of the oldest change a synced sandbox may hold unsaved (since its first use or last successful save); 0 when none.',
    ['scope'],
    () => {
      const now = Date.now();
      return Object.entries(source.folderSync.unsavedSince()).map(([scope, since]) => ({
        labels: { scope },
        value: since === null ? 0 : Math.max(0, now - since) / 1000,
      }));
    },
  );
  const saveFailures = metrics.counter(
    'holdfast_work_folder_save_failures_total',
    'Failed saves of a bound work-folder directory, by scope and error code.',
    ['scope', 'code'],
  );

  const sweeps = metrics.counter(
    'holdfast_gc_sweeps_total',
    'GC sweeps this replica ran (it held the sweep claim), by outcome (swept, failed).',
    ['outcome'],
  );
  const sweepSeconds = metrics.histogram(
    'holdfast_gc_sweep_duration_seconds',
    'Time a GC sweep took, by outcome.',
    GC_SWEEP_DURATION_BUCKETS_SECONDS,
    ['outcome'],
  );
  const bytesFreed = metrics.counter('holdfast_gc_bytes_freed_total', 'Bytes of pack blobs GC sweeps deleted.');
  for (const outcome of ['swept', 'failed']) sweeps.inc({ outcome }, 0);

  source.onRunEvent((event) => {
    switch (event.event) {
      case 'checkpoint_finished': {
        const { reason, outcome } = event;
        checkpoints.inc({ reason, outcome });
        checkpointSeconds.observe({ reason, outcome }, event.durationMs / 1000);
        if (event.code === null) {
          checkpointBytesNew.inc({ reason }, event.bytesNew);
          checkpointFiles.inc({ reason }, event.files);
          checkpointScans.inc({ mode: event.scanMode ?? 'unknown' });
          if (event.watchMissed > 0) watchMissed.inc({}, event.watchMissed);
        } else checkpointFailures.inc({ reason, code: event.code });
        break;
      }
      case 'restore_finished':
        restores.inc({ outcome: event.outcome });
        restoreSeconds.observe({ outcome: event.outcome }, event.durationMs / 1000);
        if (event.code === null) restoreBytes.inc({}, event.bytesFetched);
        else restoreFailures.inc({ code: event.code });
        break;
      case 'lease_taken_over':
        takeovers.inc();
        break;
      case 'lease_lost':
        lost.inc();
        break;
      case 'work_folder_save_failed':
        saveFailures.inc({ scope: event.scope, code: event.code });
        break;
      case 'gc_sweep_finished':
        sweeps.inc({ outcome: event.outcome });
        sweepSeconds.observe({ outcome: event.outcome }, event.durationMs / 1000);
        bytesFreed.inc({}, event.bytesFreed);
        break;
      default:
        break;
    }
  });
}
