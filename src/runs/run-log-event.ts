import type { SaveMoment } from './run-extension.js';

type Level = 'info' | 'warn' | 'error';

/**
 * Something the runs layer did, for logs and metrics: a union discriminated by `event`, so a
 * consumer switches on it and reads only fields that event carries (a mismatch does not
 * compile, where an open field bag let a metric wait for a message nothing sent). `msg` is
 * the human-readable line; `level` its log level.
 */
export type RunLogEvent =
  | {
      readonly event: 'turn_started';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly turn: string;
      readonly seq: number;
      readonly epoch: number;
    }
  | {
      readonly event: 'turn_completed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly turn: string;
      readonly checkpoint: string;
    }
  | {
      readonly event: 'turn_failed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly turn: string;
      readonly error: unknown;
    }
  | {
      readonly event: 'step';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      /** What the step belongs to: `recovery`, `upgrade`, `lease`, `sweep`, … */
      readonly kind: string;
      readonly step: string;
      readonly status: 'ok' | 'failed';
      readonly durationMs: number;
    }
  | {
      readonly event: 'periodic_checkpoint_failed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly error: unknown;
    }
  | {
      readonly event: 'upgrade_failed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly deploymentId: string;
      readonly error: unknown;
    }
  | { readonly event: 'lease_lost'; readonly level: Level; readonly msg: string; readonly runId: string; readonly epoch: number }
  | {
      readonly event: 'lease_release_failed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly epoch: number;
      readonly error: unknown;
    }
  | {
      readonly event: 'shutdown_incomplete';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly what: 'turn' | 'checkpoint';
      readonly error: string;
    }
  | {
      readonly event: 'stray_sweep_finished';
      readonly level: Level;
      readonly msg: string;
      readonly removed: number;
      readonly skipped: number;
      readonly foreign: number;
      readonly failed: number;
      readonly durationMs: number;
    }
  | {
      readonly event: 'stray_sweep_list_failed';
      readonly level: Level;
      readonly msg: string;
      readonly provider: string;
      readonly error: unknown;
    }
  | { readonly event: 'stray_sweep_failed'; readonly level: Level; readonly msg: string; readonly error: unknown }
  | {
      /** A `RunExtension` call whose rejection is only logged (a periodic save, a boundary). */
      readonly event: 'extension_failed';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly extension: string;
      readonly call: 'save' | 'boundary';
      /** The save's moment; `null` for a boundary. */
      readonly moment: SaveMoment | null;
      readonly error: unknown;
    };

/** Where the runs layer reports {@link RunLogEvent}s: one per process, handed to every part that reports. */
export class RunEvents {
  private readonly listeners = new Set<(event: RunLogEvent) => void>();

  /** Adds a listener for every event; returns its removal. */
  subscribe(listener: (event: RunLogEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reports an event to the listeners (never throws). */
  log(event: RunLogEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A failing listener must not fail a turn.
      }
    }
  }
}
