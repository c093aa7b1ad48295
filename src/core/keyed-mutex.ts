import { ConflictError } from '../errors.js';

/**
 * First-come-first-served locks by key within this process, with a bounded wait. Turns of one
 * run queue here before they poll the database lease, so local waiters do not hammer it.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /**
   * Resolves with a release function once every earlier holder of `key` released; rejects with
   * `CONFLICT` (data `{reason: 'busy'}`) after `waitMs`, leaving the queue as it was.
   */
  async acquire(key: string, waitMs: number): Promise<() => void> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), waitMs);
    });
    const outcome = await Promise.race([previous.then(() => 'ready' as const), timedOut]);
    clearTimeout(timer);
    const done = (): void => {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
    if (outcome === 'timeout') {
      // Our slot passes straight through once the holders before us finish.
      done();
      throw new ConflictError('CONFLICT', `waited ${waitMs} ms for the previous turn of ${key} to finish; retry later`, {
        data: { runId: key, reason: 'busy', waitedMs: waitMs },
      });
    }
    return done;
  }
}
