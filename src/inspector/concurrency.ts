/** Bounded parallel work for the page's follow-up requests. */

/** Requests the page sends at once for one list (browsers allow about 6 per origin over HTTP/1.1). */
export const MAX_PARALLEL_REQUESTS = 4;

/** Calls `work` on every item, at most `limit` at a time; failures are the callee's to handle. */
export async function eachLimited<T>(items: readonly T[], work: (item: T) => Promise<void>, limit = MAX_PARALLEL_REQUESTS): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
