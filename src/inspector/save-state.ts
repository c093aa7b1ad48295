/**
 * The save-state label of a work folder, always one of these, in this order of priority:
 * a change made from this page in flight or refused (`Saving…`, `Save failed`), the save
 * status route unreachable (`Save status unavailable`) or not answered yet (`Loading save
 * status…`), then what the sandboxes report: one saving (`Saving…`), one failed (`Save
 * failed`, with its error and run), an active run that has not saved yet (`Waiting for first
 * save`: its edits are never shown as saved), a save or a change known (`Saved`), nothing
 * (`No saved files`).
 */
import type { SyncSandbox } from './model.js';

/** What the page knows about the collection's save state. */
export interface SaveInputs {
  /** A trash or restore from this page: in flight, refused (with its error), or neither. */
  readonly mutation: { readonly state: 'idle' } | { readonly state: 'pending' } | { readonly state: 'failed'; readonly error: CodeMessage };
  /** The save status route: not answered yet, unreachable (404 when the service has no such route), or its sandboxes. */
  readonly sync:
    | { readonly state: 'loading' }
    | { readonly state: 'unavailable'; readonly error: CodeMessage }
    | { readonly state: 'ok'; readonly sandboxes: readonly SyncSandbox[] };
  /** `lastOperationAt` of the file listing. */
  readonly lastOperationAt: number | null;
  /** Live files listed. */
  readonly fileCount: number;
}

interface CodeMessage {
  readonly code: string;
  readonly message: string;
}

/** The label and what goes with it. */
export interface SaveLabel {
  readonly kind: 'saving' | 'failed' | 'unavailable' | 'loading' | 'waiting' | 'saved' | 'none';
  readonly text: string;
  /** The error of a failed save. */
  readonly error?: CodeMessage;
  /** The run whose save failed (a link to it). */
  readonly runId?: string;
  /** When the agent last saved (the newest `lastSavedAt`), kept visible whatever the label. */
  readonly lastSavedAt: number | null;
  /** Runs that ended before their final save completed: they keep `lastSavedAt`, but their last edits may be lost. */
  readonly interrupted: readonly SyncSandbox[];
}

/** The label for `inputs` (see the module comment for the order). */
export function saveLabel(inputs: SaveInputs): SaveLabel {
  const sandboxes = inputs.sync.state === 'ok' ? inputs.sync.sandboxes : [];
  const saved = sandboxes.map((s) => s.lastSavedAt).filter((t): t is number => t !== null);
  const lastSavedAt = saved.length === 0 ? null : Math.max(...saved);
  const interrupted = sandboxes.filter((s) => !s.active && s.finalCheckpointAt === null && s.state !== 'never_saved');
  const base = { lastSavedAt, interrupted };
  if (inputs.mutation.state === 'pending') return { ...base, kind: 'saving', text: 'Saving…' };
  if (inputs.mutation.state === 'failed') return { ...base, kind: 'failed', text: 'Save failed', error: inputs.mutation.error };
  if (inputs.sync.state === 'unavailable')
    return { ...base, kind: 'unavailable', text: 'Save status unavailable', error: inputs.sync.error };
  if (inputs.sync.state === 'loading') return { ...base, kind: 'loading', text: 'Loading save status…' };
  if (sandboxes.some((s) => s.state === 'saving')) return { ...base, kind: 'saving', text: 'Saving…' };
  const failed = sandboxes.find((s) => s.state === 'failed');
  if (failed !== undefined) {
    const error = failed.error ?? { code: 'UNKNOWN', message: 'the save failed without an error' };
    return { ...base, kind: 'failed', text: 'Save failed', error, runId: failed.runId };
  }
  if (sandboxes.some((s) => s.active && s.state === 'never_saved')) return { ...base, kind: 'waiting', text: 'Waiting for first save' };
  if (lastSavedAt !== null || inputs.lastOperationAt !== null || inputs.fileCount > 0) return { ...base, kind: 'saved', text: 'Saved' };
  return { ...base, kind: 'none', text: 'No saved files' };
}
