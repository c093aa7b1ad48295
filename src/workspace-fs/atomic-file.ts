import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Flags for opening a directory to fsync it. */
const { O_RDONLY } = fs.constants;

/** fsync a directory so a rename or a new entry in it survives a crash; best effort where unsupported. */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, O_RDONLY);
    fs.fsyncSync(fd);
  } catch {
    // Some filesystems refuse fsync on directories; the rename itself has still happened.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** Replaces `file` with `text` atomically: temp file, fsync, rename, fsync the directory. */
export function writeFileAtomic(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(temp, 'w', 0o600);
  try {
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(temp, file);
  fsyncDir(path.dirname(file));
}
