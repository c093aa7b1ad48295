import type { CheckpointReason } from '../metadata/metadata-store.js';
import type { FolderScope } from '../model/folder-scopes.js';
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
      /** This process claimed a run's lease that another owner held and let expire. */
      readonly event: 'lease_taken_over';
      readonly level: Level;
      readonly msg: string;
      readonly runId: string;
      readonly epoch: number;
      /** The owner whose lease expired. */
      readonly from: string;
    }
  | {
      /** A checkpoint of any workspace this process took (runs, work-folder sync, repositories, the API). */
      readonly event: 'checkpoint_finished';
      readonly level: Level;
      readonly msg: string;
      readonly reason: CheckpointReason;
      readonly outcome: 'ready' | 'failed';
      readonly durationMs: number;
      /** Files of the ready checkpoint; 0 when it failed. */
      readonly files: number;
      /** Raw bytes of objects the checkpoint stored anew; 0 when it failed. */
      readonly bytesNew: number;
      /** The failure's closed error code; `null` when ready. */
      readonly code: string | null;
      /** `delta` when the source read only what changed (an agent's watches), `full` when it read everything; `null` when it does not say or the checkpoint failed. */
      readonly scanMode: 'delta' | 'full' | null;
      /** Directories a verifying scan found changed though the agent's watches had not told (0 normally: anything else is worth a look). */
      readonly watchMissed: number;
    }
  | {
      /** A restore this process ran (every restore: a run's recovery or upgrade, the API's, the CLI's). */
      readonly event: 'restore_finished';
      readonly level: Level;
      readonly msg: string;
      readonly outcome: 'ok' | 'failed';
      readonly durationMs: number;
      /** Bytes fetched from the blob store; 0 when it failed. */
      readonly bytesFetched: number;
      readonly code: string | null;
    }
  | {
      /** A GC sweep this replica ran (it held the sweep claim). */
      readonly event: 'gc_sweep_finished';
      readonly level: Level;
      readonly msg: string;
      readonly outcome: 'swept' | 'failed';
      readonly durationMs: number;
      /** Bytes of pack blobs deleted; 0 when it failed. */
      readonly bytesFreed: number;
    }
  | {
      /** A save of a bound work-folder directory failed (the sandbox keeps the changes). */
      readonly event: 'work_folder_save_failed';
      readonly level: Level;
      readonly msg: string;
      readonly scope: FolderScope;
      readonly code: string;
    }
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
      readonly call: 'save' | 'boundary' | 'detach';
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
