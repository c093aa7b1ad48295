/** Timings and bounds of the runs layer; each can be overridden through `openHoldfast({ runSettings })`. */
export interface RunSettings {
  /** How long a claimed lease lives without a heartbeat. */
  readonly leaseTtlMs: number;
  /** Heartbeat period; default a third of the TTL. */
  readonly heartbeatMs: number;
  /** How long a turn waits for the previous one of the same run to release. */
  readonly turnWaitMs: number;
  /** Periodic checkpoint interval while a turn runs (0 disables). */
  readonly checkpointIntervalMs: number;
  /** Bound on each setup and validation command. */
  readonly setupTimeoutMs: number;
  /** Bound on stopping (destroying) a sandbox before the stop counts as uncertain. */
  readonly stopTimeoutMs: number;
  /** Graceful shutdown deadline. */
  readonly shutdownDeadlineMs: number;
  /** Idle sandboxes checkpointed at once during shutdown. */
  readonly shutdownConcurrency: number;
  /** Interval of the service's sweep for stray sandboxes (0 disables); see {@link STRAY_SWEEP_INTERVAL_MS}. */
  readonly straySweepIntervalMs: number;
}

/**
 * Default interval of the stray sweep. Strays come only from failures (a failed
 * `destroy_old_sandbox`, a crash between create and commit), so they are rare, but each one
 * holds provider resources (a cloud sandbox is billed while it lives) until it is removed; ten
 * minutes bounds that cost while a sweep costs one `list` per provider and one lease claim per
 * run that has strays.
 */
export const STRAY_SWEEP_INTERVAL_MS = 10 * 60_000;

/** Defaults of {@link RunSettings} (DESIGN section 9). */
export const DEFAULT_RUN_SETTINGS: RunSettings = Object.freeze({
  leaseTtlMs: 30_000,
  heartbeatMs: 10_000,
  turnWaitMs: 30_000,
  checkpointIntervalMs: 180_000,
  setupTimeoutMs: 10 * 60_000,
  stopTimeoutMs: 30_000,
  shutdownDeadlineMs: 30_000,
  shutdownConcurrency: 4,
  straySweepIntervalMs: STRAY_SWEEP_INTERVAL_MS,
});

/** The settings in force: the defaults under `overrides`, with the heartbeat a third of the lease TTL unless given. */
export function resolveRunSettings(overrides: Partial<RunSettings> = {}): RunSettings {
  const ttl = overrides.leaseTtlMs ?? DEFAULT_RUN_SETTINGS.leaseTtlMs;
  return Object.freeze({ ...DEFAULT_RUN_SETTINGS, heartbeatMs: Math.max(1, Math.floor(ttl / 3)), ...overrides });
}
