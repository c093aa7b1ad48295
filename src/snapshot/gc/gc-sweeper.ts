import { randomUUID } from 'node:crypto';
import { collectGarbage, type GcDeps, type GcOptions, type GcReport } from './gc.js';
import { checkPackPresence, type PresenceReport } from './pack-presence.js';
import type { RetentionPolicy } from './retention.js';

/** How often the service sweeps (DESIGN section 10): every 3 minutes. */
export const GC_SWEEP_INTERVAL_MS = 3 * 60 * 1000;
/**
 * What the service's sweep keeps of checkpoints: every ready one. The sweep collects garbage
 * (what nothing references any more: purged folder files, refused uploads, what `holdfast gc`
 * with a retention forgot); forgetting checkpoints is the operator's decision (`holdfast gc
 * --keep-last …`), never a side effect of running the service.
 */
export const SWEEP_RETENTION: RetentionPolicy = Object.freeze({ keepLast: Number.MAX_SAFE_INTEGER, keepDaily: 0 });
/** The claim's name in `service_claims`. */
export const GC_SWEEP_CLAIM = 'gc-sweep';
/** A sweep in progress renews its claim this often (a fraction of the claim's life). */
const RENEW_FRACTION = 3;
/** Shortest claim: a tiny interval (tests) must not let a running sweep's claim lapse between renewals. */
const MIN_CLAIM_TTL_MS = 1000;

/** What a sweep attempt did. */
export type GcSweepOutcome =
  | { readonly kind: 'swept'; readonly report: GcReport; readonly presence: PresenceReport }
  /** Another replica holds the claim: this one did nothing. */
  | { readonly kind: 'skipped'; readonly holder: string | null };

/** Settings of a {@link GcSweeper}. */
export interface GcSweeperOptions {
  /** Default {@link GC_SWEEP_INTERVAL_MS}; 0 (or less, or infinite) never ticks. */
  readonly intervalMs?: number;
  /** This replica's claim holder id; default a random one. */
  readonly holder?: string;
  /** Options of each GC run (grace; retention default {@link SWEEP_RETENTION}; `now` is taken afresh per run unless given). */
  readonly gc?: GcOptions;
  /** Receives failures of timer-driven sweeps (which otherwise have nobody to reject to). */
  readonly onError?: (error: unknown) => void;
  /** Told of every sweep this replica ran (it had the claim), timer-driven or not, for metrics; must not throw. */
  readonly onSweep?: (sweep: GcSweepFinished) => void;
}

/** A sweep this replica ran: `swept` with the bytes of pack blobs it deleted, or `failed`. */
export type GcSweepFinished =
  | { readonly outcome: 'swept'; readonly durationMs: number; readonly bytesFreed: number }
  | { readonly outcome: 'failed'; readonly durationMs: number };

/**
 * The service's periodic GC sweep, on one replica at a time: each tick claims
 * {@link GC_SWEEP_CLAIM} in the metadata store for one interval (renewed while the sweep
 * runs) and, only if it got the claim, checks that every indexed pack is still in the blob
 * store ({@link checkPackPresence}: one listing, no pack read; first, so a GC that cannot run
 * still finds lost packs) and runs GC. The claim is left to expire rather than
 * released, so replicas between them sweep about once per interval, not once each; a replica
 * that dies mid-sweep loses the claim when it expires. Started and stopped with the service.
 */
export class GcSweeper {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<GcSweepOutcome> | undefined;
  readonly holder: string;
  readonly intervalMs: number;

  constructor(
    private readonly deps: GcDeps,
    private readonly options: GcSweeperOptions = {},
  ) {
    this.holder = options.holder ?? `gc:${randomUUID()}`;
    this.intervalMs = options.intervalMs ?? GC_SWEEP_INTERVAL_MS;
  }

  /** Starts the timer (idempotent); a non-positive or infinite interval never ticks. */
  start(): void {
    const interval = this.intervalMs;
    if (this.timer !== undefined || !(interval > 0) || !Number.isFinite(interval)) return;
    this.timer = setInterval(() => {
      if (this.inFlight === undefined) this.runOnce().catch((error: unknown) => this.options.onError?.(error));
    }, interval);
    this.timer.unref();
  }

  /** Whether the timer is running. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  /**
   * One attempt now (after the one in flight): claims the sweep and runs GC, or reports who
   * holds the claim. Rejects when the metadata store or GC fails.
   */
  async runOnce(): Promise<GcSweepOutcome> {
    await this.inFlight?.catch(() => undefined);
    const attempt = this.attempt();
    this.inFlight = attempt;
    try {
      return await attempt;
    } finally {
      if (this.inFlight === attempt) this.inFlight = undefined;
    }
  }

  /** Stops the timer and resolves once the sweep in flight (if any) has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight?.catch(() => undefined);
  }

  private async attempt(): Promise<GcSweepOutcome> {
    const { claims } = this.deps.meta;
    const ttl = Math.max(
      MIN_CLAIM_TTL_MS,
      Number.isFinite(this.intervalMs) && this.intervalMs > 0 ? this.intervalMs : GC_SWEEP_INTERVAL_MS,
    );
    if (!(await claims.claim(GC_SWEEP_CLAIM, this.holder, ttl))) {
      return { kind: 'skipped', holder: (await claims.holder(GC_SWEEP_CLAIM))?.holder ?? null };
    }
    const renew = setInterval(() => {
      claims.claim(GC_SWEEP_CLAIM, this.holder, ttl).catch((error: unknown) => this.options.onError?.(error));
    }, ttl / RENEW_FRACTION);
    renew.unref();
    const started = performance.now();
    try {
      const now = this.options.gc?.now;
      const presence = await checkPackPresence(this.deps, now === undefined ? {} : { now });
      const report = await collectGarbage(this.deps, { retention: SWEEP_RETENTION, ...this.options.gc });
      this.tell({ outcome: 'swept', durationMs: performance.now() - started, bytesFreed: report.bytesFreed });
      return { kind: 'swept', report, presence };
    } catch (error) {
      this.tell({ outcome: 'failed', durationMs: performance.now() - started });
      throw error;
    } finally {
      clearInterval(renew);
    }
  }

  private tell(sweep: GcSweepFinished): void {
    try {
      this.options.onSweep?.(sweep);
    } catch {
      // A listener is for metrics only: it must not fail the sweep.
    }
  }
}
