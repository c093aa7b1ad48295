import { describe, expect, it } from 'vitest';
import type { SyncSandbox } from './model.js';
import { type SaveInputs, saveLabel } from './save-state.js';

const sandbox = (over: Partial<SyncSandbox>): SyncSandbox => ({
  runId: 'r1',
  sandbox: { provider: 'bwrap', id: 'sbx-1' },
  state: 'saved',
  lastSavedAt: 1000,
  finalCheckpointAt: null,
  error: null,
  refresh: { state: 'none', at: null, error: null },
  active: true,
  ...over,
});
const inputs = (over: Partial<SaveInputs>): SaveInputs => ({
  mutation: { state: 'idle' },
  sync: { state: 'ok', sandboxes: [] },
  lastOperationAt: null,
  fileCount: 0,
  ...over,
});
const failure = { code: 'STORE_UNAVAILABLE', message: 'down' };

describe('saveLabel', () => {
  it('follows the priority order: mutation, route, loading, saving, failed, waiting, saved, none', () => {
    const saving = { state: 'ok' as const, sandboxes: [sandbox({ state: 'saving' }), sandbox({ state: 'failed', error: failure })] };
    expect(saveLabel(inputs({ mutation: { state: 'pending' }, sync: { state: 'unavailable', error: failure } })).kind).toBe('saving');
    expect(saveLabel(inputs({ mutation: { state: 'failed', error: failure }, sync: { state: 'loading' } })).kind).toBe('failed');
    expect(saveLabel(inputs({ sync: { state: 'unavailable', error: failure } })).text).toBe('Save status unavailable');
    expect(saveLabel(inputs({ sync: { state: 'loading' } })).text).toBe('Loading save status…');
    expect(saveLabel(inputs({ sync: saving })).text).toBe('Saving…');
    const failed = saveLabel(inputs({ sync: { state: 'ok', sandboxes: [sandbox({ state: 'failed', error: failure, runId: 'r9' })] } }));
    expect(failed).toMatchObject({ kind: 'failed', text: 'Save failed', error: failure, runId: 'r9', lastSavedAt: 1000 });
    expect(
      saveLabel(inputs({ sync: { state: 'ok', sandboxes: [sandbox({ state: 'never_saved', lastSavedAt: null })] }, fileCount: 3 })).text,
    ).toBe('Waiting for first save');
    expect(saveLabel(inputs({ sync: { state: 'ok', sandboxes: [sandbox({})] } }))).toMatchObject({ text: 'Saved', lastSavedAt: 1000 });
    expect(saveLabel(inputs({ fileCount: 2 })).text).toBe('Saved');
    expect(saveLabel(inputs({})).text).toBe('No saved files');
  });

  it('never shows an active run that has not saved as saved, even beside an older saved one', () => {
    const sandboxes = [
      sandbox({ runId: 'old', active: false, finalCheckpointAt: 900 }),
      sandbox({ runId: 'new', state: 'never_saved', lastSavedAt: null }),
    ];
    expect(saveLabel(inputs({ sync: { state: 'ok', sandboxes } })).kind).toBe('waiting');
  });

  it('reports a run that ended before its final save, keeping the last successful save time', () => {
    const label = saveLabel(
      inputs({ sync: { state: 'ok', sandboxes: [sandbox({ active: false, lastSavedAt: 1234, finalCheckpointAt: null })] } }),
    );
    expect(label.kind).toBe('saved');
    expect(label.lastSavedAt).toBe(1234);
    expect(label.interrupted.map((s) => s.runId)).toEqual(['r1']);
  });
});
