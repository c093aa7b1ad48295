import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { DEFAULT_LOG_LEVEL, readConfigEnv } from '../../config.js';
import type { CreatedToken, Holdfast, RunSettings } from '../../index.js';
import type { Logger } from '../../server/logger.js';
import { EXIT_FAILURE, requestExitCode } from '../output.js';
import { contextOf, packageVersion } from '../program.js';

/** Interface `serve` binds when neither `--host` nor `HOLDFAST_HOST` says otherwise: loopback only. */
const DEFAULT_HOST = '127.0.0.1';
/** Port `serve` binds when neither `--port` nor `HOLDFAST_PORT` says otherwise. */
const DEFAULT_PORT = 7420;
/** Highest TCP port. */
const MAX_PORT = 65_535;
/**
 * Extra time, past the run shutdown deadline and the grace an aborted turn gets to settle
 * (`INTERRUPTED_TURN_GRACE_MS`), that in-flight HTTP responses get before their connections
 * are cut: a turn aborted at the deadline still answers its client (with `INTERRUPTED`).
 */
const RESPONSE_GRACE_AFTER_DEADLINE_MS = 2_000;
/** Tenant and label of the admin token `--init` creates. */
const INIT_TENANT = 'default';
const INIT_TOKEN_NAME = 'init';

interface ServeFlags {
  readonly host?: string;
  readonly port?: number;
  readonly leaseTtlMs?: number;
  readonly checkpointIntervalMs?: number;
  readonly shutdownDeadlineMs?: number;
  readonly straySweepIntervalMs?: number;
  readonly gcSweepIntervalMs?: number;
  readonly init?: boolean;
  /** False with `--no-inspector`. */
  readonly inspector: boolean;
}

/**
 * `holdfast serve`: the HTTP API over the configured store, with JSON logs on stdout, until
 * SIGTERM or SIGINT; then a graceful shutdown (a second signal exits at once with 1).
 */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the HTTP API (JSON logs on stdout) until SIGTERM/SIGINT, then shut down gracefully')
    .option('--host <host>', `interface to bind (default $HOLDFAST_HOST or ${DEFAULT_HOST})`)
    .option('--port <n>', `TCP port, 0 for any free one (default $HOLDFAST_PORT or ${DEFAULT_PORT})`, intFlag('--port', 0, MAX_PORT))
    .option(
      '--lease-ttl-ms <ms>',
      'run lease lifetime without a heartbeat (default $HOLDFAST_LEASE_TTL_MS or 30000)',
      intFlag('--lease-ttl-ms', 1),
    )
    .option(
      '--checkpoint-interval-ms <ms>',
      'periodic checkpoint interval during a turn, 0 disables (default $HOLDFAST_CHECKPOINT_INTERVAL_MS or 180000)',
      intFlag('--checkpoint-interval-ms', 0),
    )
    .option(
      '--shutdown-deadline-ms <ms>',
      'how long shutdown lets turns finish and checkpoints idle sandboxes (default $HOLDFAST_SHUTDOWN_DEADLINE_MS or 30000)',
      intFlag('--shutdown-deadline-ms', 1),
    )
    .option(
      '--stray-sweep-interval-ms <ms>',
      'how often sandboxes left behind for runs are destroyed, 0 disables (default $HOLDFAST_STRAY_SWEEP_INTERVAL_MS or 600000)',
      intFlag('--stray-sweep-interval-ms', 0),
    )
    .option(
      '--gc-sweep-interval-ms <ms>',
      'how often GC sweeps the store (one replica at a time), 0 disables (default $HOLDFAST_GC_SWEEP_INTERVAL_MS or 180000)',
      intFlag('--gc-sweep-interval-ms', 0),
    )
    .option('--init', 'if the store holds no live token, create an admin token for tenant default and print it once')
    .option('--no-inspector', 'do not serve the inspector at /ui/ (its paths answer 404; default $HOLDFAST_INSPECTOR or on)')
    .action(async (flags: ServeFlags, command: Command) => {
      const { config } = contextOf(command);
      // Checked by the configuration's env schema (contextOf already refused a bad value).
      const env = readConfigEnv(process.env);
      const host = flags.host ?? env.HOLDFAST_HOST ?? DEFAULT_HOST;
      const port = flags.port ?? env.HOLDFAST_PORT ?? DEFAULT_PORT;
      const inspector = flags.inspector && (env.HOLDFAST_INSPECTOR ?? true);
      const runSettings = definedOnly<RunSettings>({
        leaseTtlMs: flags.leaseTtlMs ?? env.HOLDFAST_LEASE_TTL_MS,
        checkpointIntervalMs: flags.checkpointIntervalMs ?? env.HOLDFAST_CHECKPOINT_INTERVAL_MS,
        shutdownDeadlineMs: flags.shutdownDeadlineMs ?? env.HOLDFAST_SHUTDOWN_DEADLINE_MS,
        straySweepIntervalMs: flags.straySweepIntervalMs ?? env.HOLDFAST_STRAY_SWEEP_INTERVAL_MS,
      });
      const [
        { openHoldfast, DEFAULT_RUN_SETTINGS, GC_SWEEP_INTERVAL_MS, INTERRUPTED_TURN_GRACE_MS },
        { createJsonLogger },
        { Metrics },
        { createApp },
        { listen },
      ] = await Promise.all([
        import('../../index.js'),
        import('../../server/logger.js'),
        import('../../server/metrics.js'),
        import('../../server/app.js'),
        import('../../server/http-server.js'),
      ]);
      const settings = { ...DEFAULT_RUN_SETTINGS, ...runSettings };
      const gcSweepIntervalMs = flags.gcSweepIntervalMs ?? env.HOLDFAST_GC_SWEEP_INTERVAL_MS ?? GC_SWEEP_INTERVAL_MS;
      const log = createJsonLogger({ level: env.HOLDFAST_LOG_LEVEL ?? DEFAULT_LOG_LEVEL });
      const hf = await openHoldfast({
        config,
        runSettings,
        gcSweepIntervalMs,
        onGcSweepError: (error) => log.warn('gc sweep failed', { error }),
        onRunEvent: ({ level, msg, ...fields }) => log[level](msg, fields),
      });
      let created: CreatedToken | undefined;
      let server: Awaited<ReturnType<typeof listen>>;
      const version = packageVersion();
      try {
        if (flags.init === true) created = await initAdminToken(hf);
        const app = createApp({ hf, log, metrics: new Metrics(), version, inspector });
        const closeGraceMs = settings.shutdownDeadlineMs + INTERRUPTED_TURN_GRACE_MS + RESPONSE_GRACE_AFTER_DEADLINE_MS;
        server = await listen(app, { host, port, closeGraceMs });
      } catch (error) {
        await hf.close();
        throw error;
      }
      const signalled = untilSignal(log);
      // Stopped by hf.shutdown() below, before the stores close.
      hf.startStraySweeps();
      hf.startGcSweeps();
      const { leaseTtlMs, checkpointIntervalMs, shutdownDeadlineMs, straySweepIntervalMs } = settings;
      log.info('listening', {
        url: server.url,
        host,
        port: server.port,
        version,
        pid: process.pid,
        leaseTtlMs,
        checkpointIntervalMs,
        shutdownDeadlineMs,
        straySweepIntervalMs,
        gcSweepIntervalMs,
        inspector,
      });
      process.stderr.write(banner(server.url, version, flags.init === true, created));

      log.info('shutting down', { signal: await signalled });
      const [closed, drained] = await Promise.allSettled([server.close(), hf.shutdown()]);
      if (closed.status === 'rejected') log.error('HTTP server did not close cleanly', { error: closed.reason });
      // The runs layer already logs each incomplete item at warn through onRunEvent.
      if (drained.status === 'fulfilled') log.info('shutdown report', { ...drained.value });
      else log.error('run shutdown failed', { error: drained.reason });
      await hf.close();
      if (closed.status === 'rejected' || drained.status === 'rejected') requestExitCode(EXIT_FAILURE);
      log.info('stopped');
    });
}

/** The admin token `--init` creates, or `undefined` when a live token exists already. */
async function initAdminToken(hf: Holdfast): Promise<CreatedToken | undefined> {
  const live = (await hf.tokens.list()).filter((t) => t.revokedAt === null);
  if (live.length > 0) return undefined;
  return hf.tokens.create({ tenant: INIT_TENANT, name: INIT_TOKEN_NAME, admin: true });
}

/** Resolves with the first SIGTERM/SIGINT; a second one exits the process at once with 1. */
function untilSignal(log: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (received) {
        log.warn('second signal: exiting without finishing the shutdown', { signal });
        process.exit(EXIT_FAILURE);
      }
      received = true;
      resolve(signal);
    };
    process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
  });
}

/** The human summary on stderr; stdout carries only JSON log lines. */
function banner(url: string, version: string, init: boolean, created: CreatedToken | undefined): string {
  const lines = [`holdfast ${version} listening on ${url}`];
  if (created !== undefined) {
    lines.push(`admin token: ${created.token}`, `  (tenant ${created.tenant}; shown only once: store it now)`);
  } else if (init) {
    lines.push('--init: tokens exist already; create another with: holdfast token create --admin');
  }
  lines.push('SIGTERM or Ctrl-C shuts down gracefully; a second one exits at once');
  return `${lines.join('\n')}\n`;
}

/** Parses an integer flag in `[min, max]`. */
function intFlag(name: string, min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
}

/** Drops `undefined` values, as exactOptionalPropertyTypes requires of a `Partial`. */
function definedOnly<T>(values: { [K in keyof T]?: T[K] | undefined }): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;
}
