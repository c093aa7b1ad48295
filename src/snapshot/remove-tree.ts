import fs from 'node:fs';
import path from 'node:path';

/**
 * Removes a tree, read-only directories included (a restored workspace may hold `0555`
 * directories, whose entries not even their owner may unlink): on `EACCES`/`EPERM` every
 * directory is given owner rwx and the removal is tried again. Symlinks are never followed.
 */
export function removeTree(p: string): void {
  try {
    fs.rmSync(p, { recursive: true, force: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'EACCES' && code !== 'EPERM') throw error;
    const open = (dir: string): void => {
      fs.chmodSync(dir, 0o700);
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) open(path.join(dir, e.name));
    };
    open(p);
    fs.rmSync(p, { recursive: true, force: true });
  }
}
