import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkpointState } from './commands/checkpoint.js';
import { Output } from './output.js';
import { describeProgress, ETA_AFTER_MS, formatDuration, PLAIN_INTERVAL_MS, startProgress } from './progress.js';

/** A non-TTY stderr that keeps what was written. */
function plainStream(): { stream: NodeJS.WriteStream; text: () => string } {
  const sink = new PassThrough();
  const parts: string[] = [];
  sink.on('data', (d: Buffer) => parts.push(d.toString()));
  return { stream: Object.assign(sink, { isTTY: false }) as unknown as NodeJS.WriteStream, text: () => parts.join('') };
}

describe('progress', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('says what is really done: files, examined bytes and no upload figures it does not have', () => {
    const read = checkpointState({ phase: 'read', files: 500, filesTotal: 2000, bytes: 30 * 1024 * 1024, bytesTotal: 195 * 1024 * 1024 });
    expect(describeProgress(read)).toBe('reading changed files: 500/2000 files, 30.0 MiB/195.0 MiB examined');
    const upload = checkpointState({ phase: 'upload', files: 2000, filesTotal: 2000, bytes: 1, bytesTotal: 1 });
    expect(describeProgress(upload)).toBe('writing trees and finishing pack uploads');
    expect(describeProgress({ step: 'mark', items: { done: 1, total: 1, noun: 'step' } })).toBe('mark: 1/1 step');
  });

  it('without a TTY prints nothing for short work, then a periodic line with an ETA', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { stream, text } = plainStream();
    const progress = startProgress(new Output(false), 'restore', stream);
    const state = (done: number) => ({ step: 'writing files', bytes: { done, total: 100, verb: 'written' } });
    progress.report(state(1));
    vi.advanceTimersByTime(ETA_AFTER_MS);
    progress.report(state(10));
    expect(text()).toBe('');
    vi.advanceTimersByTime(PLAIN_INTERVAL_MS);
    // 25 of 100 bytes in 13 s since the step began: about 39 s left.
    progress.report(state(25));
    progress.stop();
    expect(text()).toBe('restore: writing files: 25 B/100 B written, about 39 s left\n');
  });

  it('prints nothing at all with --json', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { stream, text } = plainStream();
    const progress = startProgress(new Output(true), 'gc', stream);
    vi.advanceTimersByTime(PLAIN_INTERVAL_MS * 2);
    progress.report({ step: 'mark' });
    expect(text()).toBe('');
  });

  it('formats durations for people', () => {
    expect([formatDuration(400), formatDuration(42_000), formatDuration(150_000), formatDuration(4_000_000)]).toEqual([
      '1 s',
      '42 s',
      '2 min 30 s',
      '1 h 6 min',
    ]);
  });
});
