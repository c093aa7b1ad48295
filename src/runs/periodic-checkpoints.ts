/**
 * Runs `save` every `intervalMs` while a turn runs, never two at once: a tick that finds the
 * previous save still in flight is skipped, not queued. `stop` cancels the timer and waits for
 * the save in flight, so the turn's final checkpoint never overlaps a periodic one.
 */
export class PeriodicCheckpoints {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  /** Saves started, and ticks skipped because one was in flight. */
  readonly counts = { started: 0, skipped: 0 };

  constructor(
    private readonly intervalMs: number,
    private readonly save: () => Promise<void>,
  ) {}

  /** Starts the timer; a non-positive or infinite interval never ticks. */
  start(): void {
    if (!(this.intervalMs > 0) || !Number.isFinite(this.intervalMs)) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private tick(): void {
    if (this.inFlight !== undefined) {
      this.counts.skipped += 1;
      return;
    }
    this.counts.started += 1;
    this.inFlight = this.save()
      .catch(() => undefined)
      .finally(() => {
        this.inFlight = undefined;
      });
  }

  /** Stops ticking and resolves once the save in flight (if any) has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }
}
