/**
 * The `code` a piece of work failed with, or `RESOLVED` when it succeeded. Takes a promise, or
 * a function (so a synchronous throw is caught too). Tests assert codes, never message text.
 */
export async function codeOf(work: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (error) {
    return String((error as { code?: unknown }).code);
  }
  return 'RESOLVED';
}
