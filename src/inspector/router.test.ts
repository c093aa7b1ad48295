import { describe, expect, it } from 'vitest';
import { seg } from './api.js';
import { ID_PARAMS, isPathSegment, parseRoute } from './router.js';

describe('inspector routes', () => {
  it('routes a service token to runs, a run, a checkpoint and the work folders', () => {
    expect(parseRoute('', 'service').route).toEqual({ view: 'runs' });
    expect(parseRoute('#/runs', 'service').route).toEqual({ view: 'runs' });
    expect(parseRoute('#/runs/run-1', 'service').route).toEqual({ view: 'run', runId: 'run-1' });
    expect(parseRoute('#/checkpoints/ab%2Fcd?run=r', 'service').route).toEqual({ view: 'checkpoint', checkpointId: 'ab/cd' });
    expect(parseRoute('#/folders?task=t1&tab=task', 'service')).toMatchObject({ route: { view: 'folders' } });
    // A run or user token reaches the work folders only, whatever the route.
    expect(parseRoute('#/runs/run-1', 'run').route).toEqual({ view: 'folders' });
    expect(parseRoute('#/checkpoints/c1', 'user').route).toEqual({ view: 'folders' });
  });

  it('refuses a dot segment as a run or checkpoint id, plain or percent-encoded in any case', () => {
    for (const id of ['.', '..', '%2e', '%2E%2e', '.%2E', '%2e.']) {
      for (const kind of ['runs', 'checkpoints']) {
        expect(parseRoute(`#/${kind}/${id}`, 'service').route.view, `${kind}/${id}`).toBe('not-found');
        expect(parseRoute(`#/${kind}/${id}/tree`, 'service').route.view, `${kind}/${id}/tree`).toBe('not-found');
      }
    }
  });

  it('refuses a dot segment as a run or folder owner in the query, for every kind of token', () => {
    for (const name of ID_PARAMS) {
      for (const value of ['.', '..', '%2E%2E', '%2e']) {
        for (const kind of ['service', 'user', 'run'] as const) {
          for (const path of ['folders', 'runs', `checkpoints/c1`]) {
            const parsed = parseRoute(`#/${path}?${name}=${value}&tab=task`, kind);
            expect(parsed.route.view, `${kind} ${path}?${name}=${value}`).toBe('not-found');
          }
        }
      }
    }
    // An empty owner is "not given", as before.
    expect(parseRoute('#/folders?task=&project=p', 'service').route.view).toBe('folders');
  });

  it('refuses a route that does not decode', () => {
    expect(parseRoute('#/runs/%E0%A4%A', 'service').route.view).toBe('not-found');
  });

  it('never builds an API path from a dot segment', () => {
    expect(isPathSegment('a.b')).toBe(true);
    expect(isPathSegment('...')).toBe(true);
    for (const bad of ['', '.', '..']) {
      expect(isPathSegment(bad)).toBe(false);
      expect(() => seg(bad)).toThrow();
    }
    expect(seg('a/b ..')).toBe('a%2Fb%20..');
  });
});
