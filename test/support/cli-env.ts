import path from 'node:path';

/** This process's environment without any `HOLDFAST_*` variable, so a child sees only what a test sets. */
export function environmentWithoutHoldfast(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => !e[0].startsWith('HOLDFAST_') && e[1] !== undefined),
  );
}

/**
 * The environment of a `holdfast` child process that keeps everything under `dir`: SQLite
 * metadata and local-disk blobs there, and its sandboxes and stat caches too.
 */
export function storeEnvironment(dir: string): Record<string, string> {
  return {
    ...environmentWithoutHoldfast(),
    HOLDFAST_META: `sqlite:${path.join(dir, 'meta.db')}`,
    HOLDFAST_BLOBS: `file:${path.join(dir, 'blobs')}`,
    HOLDFAST_SANDBOX_DIR: path.join(dir, 'sandboxes'),
    HOLDFAST_CACHE_DIR: path.join(dir, 'cache'),
  };
}
