import { HEADER_BUDGET_BYTES, LIST_BATCH_MAX_ITEMS } from '../wire/protocol.js';

/**
 * Cuts a list sent in request headers into parts of at most {@link LIST_BATCH_MAX_ITEMS} items
 * whose JSON stays under {@link HEADER_BUDGET_BYTES}, so long paths never push a header past
 * the frame limit. Always returns at least one (possibly empty) part.
 */
export function chunkList<T>(items: readonly T[]): T[][] {
  const parts: T[][] = [[]];
  let bytes = 0;
  for (const item of items) {
    const size = Buffer.byteLength(JSON.stringify(item)) + 1;
    let current = parts[parts.length - 1] as T[];
    if (current.length > 0 && (current.length >= LIST_BATCH_MAX_ITEMS || bytes + size > HEADER_BUDGET_BYTES)) {
      current = [];
      parts.push(current);
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  return parts;
}
