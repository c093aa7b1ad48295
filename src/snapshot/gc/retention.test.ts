import { describe, expect, it } from 'vitest';
import { MAX_CHECKPOINT_MS } from '../snapshot-deps.js';
import { FAILED_RETENTION_MS, type RetentionCandidate, selectForgettable } from './retention.js';

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const NOW = Date.UTC(2025, 5, 30, 12, 0, 0);

function ready(id: string, createdAt: number, workspaceId = 'w'): RetentionCandidate {
  return { id, workspaceId, status: 'ready', createdAt, finishedAt: createdAt + 1000 };
}

describe('selectForgettable', () => {
  it('keeps the newest keepLast and forgets the rest when keepDaily is 0', () => {
    const list = Array.from({ length: 15 }, (_, i) => ready(`c${i}`, NOW - i * HOUR));
    const forget = selectForgettable(list, new Set(['c0']), { keepLast: 10, keepDaily: 0 }, NOW);
    expect([...forget].sort()).toEqual(['c10', 'c11', 'c12', 'c13', 'c14']);
  });

  it('keeps the newest checkpoint of each of the last keepDaily UTC days that have one', () => {
    // Two a day for 10 days, at 01:00 and 13:00 UTC; day 3 has none.
    const list: RetentionCandidate[] = [];
    for (let d = 0; d < 10; d += 1) {
      if (d === 3) continue;
      const midnight = Date.UTC(2025, 5, 30 - d);
      list.push(ready(`d${d}-late`, midnight + 13 * HOUR), ready(`d${d}-early`, midnight + HOUR));
    }
    const forget = selectForgettable(list, new Set(), { keepLast: 0, keepDaily: 7 }, NOW);
    const kept = list.map((c) => c.id).filter((id) => !forget.has(id));
    // Days without checkpoints do not count: the seven days are 0,1,2,4,5,6,7.
    expect(kept).toEqual(['d0-late', 'd1-late', 'd2-late', 'd4-late', 'd5-late', 'd6-late', 'd7-late']);
  });

  it('the default policy keeps the union of last 10 and 7 daily', () => {
    const list = Array.from({ length: 40 }, (_, i) => ready(`c${i}`, NOW - i * 6 * HOUR));
    const forget = selectForgettable(list, new Set(), undefined, NOW);
    const kept = list.filter((c) => !forget.has(c.id)).map((c) => c.id);
    // Four a day (12:00, 06:00, 00:00, then 18:00 the day before): c0..c9 by keepLast; the
    // newest of each of 7 days is c0, c3, c7, c11, c15, c19, c23.
    expect(kept).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9', 'c11', 'c15', 'c19', 'c23']);
  });

  it('always keeps the head, even when the policy would not', () => {
    const list = [ready('new', NOW), ready('old-head', NOW - 30 * DAY)];
    expect(selectForgettable(list, new Set(['old-head']), { keepLast: 0, keepDaily: 0 }, NOW)).toEqual(new Set(['new']));
  });

  it('keeps young pending checkpoints and forgets ones older than MAX_CHECKPOINT_MS', () => {
    const list: RetentionCandidate[] = [
      { id: 'young', workspaceId: 'w', status: 'pending', createdAt: NOW - MAX_CHECKPOINT_MS + 1, finishedAt: null },
      { id: 'stale', workspaceId: 'w', status: 'pending', createdAt: NOW - MAX_CHECKPOINT_MS, finishedAt: null },
    ];
    expect(selectForgettable(list, new Set(), { keepLast: 0, keepDaily: 0 }, NOW)).toEqual(new Set(['stale']));
  });

  it('keeps failed checkpoints for 7 days after they failed, and they never count toward keepLast', () => {
    const list: RetentionCandidate[] = [
      {
        id: 'f-recent',
        workspaceId: 'w',
        status: 'failed',
        createdAt: NOW - FAILED_RETENTION_MS - HOUR,
        finishedAt: NOW - FAILED_RETENTION_MS + HOUR,
      },
      { id: 'f-old', workspaceId: 'w', status: 'failed', createdAt: NOW - 8 * DAY, finishedAt: NOW - 8 * DAY },
      ready('r1', NOW - 9 * DAY),
    ];
    expect(selectForgettable(list, new Set(), { keepLast: 1, keepDaily: 0 }, NOW)).toEqual(new Set(['f-old']));
  });

  it('decides per workspace', () => {
    const list = [ready('a1', NOW, 'a'), ready('a2', NOW - HOUR, 'a'), ready('b1', NOW - 2 * HOUR, 'b'), ready('b2', NOW - 3 * HOUR, 'b')];
    expect(selectForgettable(list, new Set(), { keepLast: 1, keepDaily: 0 }, NOW)).toEqual(new Set(['a2', 'b2']));
  });

  it('rejects a negative or fractional policy with INVALID_INPUT', () => {
    expect(() => selectForgettable([], new Set(), { keepLast: -1, keepDaily: 7 }, NOW)).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(() => selectForgettable([], new Set(), { keepLast: 1.5, keepDaily: 7 }, NOW)).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
  });
});
