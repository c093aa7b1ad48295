import type { RunSandboxContext, SaveMoment } from './run-extension.js';
import type { RunHost } from './run-host.js';
import type { StepRecorder } from './sandbox/sandbox-lifecycle.js';

/**
 * Calls every extension of the host in order, each call a recorded step of the run (`kind` the
 * extension's name, so it shows in the run's events and metrics). Under the run's lease; the
 * caller (`RunSession`) decides what a rejection does, as `RunExtension` says per method.
 */
export class ExtensionSteps {
  constructor(private readonly host: RunHost) {}

  /** Whether any extension is plugged in (a caller can skip work only extensions need). */
  get any(): boolean {
    return this.host.extensions.length > 0;
  }

  /**
   * `attach` of every extension, in order; resolves with their environments merged (a later
   * extension's variable wins). Rejects with the first rejection; the extensions after it are
   * not attached.
   */
  async attach(context: RunSandboxContext, start: 'cold' | 'warm'): Promise<Readonly<Record<string, string>>> {
    let env: Record<string, string> = {};
    for (const extension of this.host.extensions) {
      const added = await this.recorder(context, extension.name).step(`attach_${start}`, () => extension.attach(context, start));
      env = { ...env, ...added };
    }
    return env;
  }

  /**
   * `save(moment)` of every extension, in order; resolves with the first rejection
   * (`undefined` when all saved). On `periodic` and `turn_end` every extension is still asked to
   * save after one failed (each saves its own state, and the workspace checkpoint follows
   * anyway); on the other moments the first rejection stops the rest, as it stops the operation.
   */
  async save(context: RunSandboxContext, moment: SaveMoment): Promise<{ readonly error: unknown } | undefined> {
    const keepGoing = moment === 'periodic' || moment === 'turn_end';
    let first: { readonly error: unknown } | undefined;
    for (const extension of this.host.extensions) {
      try {
        await this.recorder(context, extension.name).step(`save_${moment}`, () => extension.save(context, moment));
      } catch (error) {
        if (moment === 'periodic') this.logFailed(context, extension.name, 'save', moment, error);
        first ??= { error };
        if (!keepGoing) break;
      }
    }
    return first;
  }

  /** `boundary` of every extension, in order; a rejection is recorded and logged, never thrown. */
  async boundary(context: RunSandboxContext): Promise<void> {
    for (const extension of this.host.extensions) {
      await this.recorder(context, extension.name)
        .step('boundary', () => extension.boundary(context))
        .catch((error: unknown) => this.logFailed(context, extension.name, 'boundary', null, error));
    }
  }

  /** `detach` of every extension that has one, in order; a rejection is logged, never thrown. */
  async detach(context: RunSandboxContext): Promise<void> {
    for (const extension of this.host.extensions) {
      await extension.detach?.(context).catch((error: unknown) => this.logFailed(context, extension.name, 'detach', null, error));
    }
  }

  private recorder(context: RunSandboxContext, name: string): StepRecorder {
    return this.host.sandboxes.recorder(context.run.id, name);
  }

  private logFailed(
    context: RunSandboxContext,
    extension: string,
    call: 'save' | 'boundary' | 'detach',
    moment: SaveMoment | null,
    error: unknown,
  ): void {
    this.host.events.log({
      event: 'extension_failed',
      level: 'warn',
      msg: `run extension ${extension} ${call}${moment === null ? '' : ` (${moment})`} failed`,
      runId: context.run.id,
      extension,
      call,
      moment,
      error,
    });
  }
}
