import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { KeyedMutex } from './keyed-mutex.js';

describe('KeyedMutex', () => {
  it('hands a key to waiters in arrival order, and keys do not block each other', async () => {
    const mutex = new KeyedMutex();
    const order: string[] = [];
    const first = await mutex.acquire('run', 1000);
    const second = mutex.acquire('run', 1000).then((release) => {
      order.push('second');
      return release;
    });
    const third = mutex.acquire('run', 1000).then((release) => {
      order.push('third');
      release();
    });
    const other = await mutex.acquire('other-run', 10);
    other();
    await sleep(20);
    expect(order).toEqual([]);
    first();
    (await second)();
    await third;
    expect(order).toEqual(['second', 'third']);
  });

  it('a waiter that times out fails with CONFLICT busy and does not hold up those behind it', async () => {
    const mutex = new KeyedMutex();
    const holder = await mutex.acquire('run', 1000);
    await expect(mutex.acquire('run', 30)).rejects.toMatchObject({ code: 'CONFLICT', data: { reason: 'busy' } });
    const later = mutex.acquire('run', 1000);
    holder();
    const release = await later;
    release();
    (await mutex.acquire('run', 10))();
  });
});
