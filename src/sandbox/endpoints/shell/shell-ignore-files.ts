import { randomBytes } from 'node:crypto';
import { ignoreFileTooLarge, MAX_IGNORE_FILE_BYTES } from '../../../rules/ignore-files.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, MAKE_SCRATCH_FILE, malformedAnswer, pathArg, runShell } from './shell-exec.js';
import { DECODE_PATHS, pathGroups } from './shell-reads.js';

/**
 * Ignore files read per exec. Each answer is at most {@link MAX_IGNORE_FILE_BYTES} plus one, so
 * this bounds what one exec may print (64 MiB) while a real tree's few small files take one exec.
 */
const IGNORE_FILES_PER_EXEC = 64;
/** Bytes of one size line of the answer (digits, or `-`, and a newline; busybox `wc` pads). */
const SIZE_LINE_BYTES = 32;

/**
 * `$1` root, `$2` nonce, `$3` byte cap, `$4` plain|coded, then paths. For each path, in order:
 * a line with the byte count of its first `$3` bytes and those bytes, or `-` when it is not a
 * readable regular file (symlinks followed); then the nonce. The bytes go through a temporary
 * file so the count and the bytes are of one read.
 */
const IGNORE_READ_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; m=$3
${DECODE_PATHS}
${MAKE_SCRATCH_FILE}
trap 'rm -f "$t"' EXIT
for x do
  if [ -f "$x" ] && head -c "$m" "$x" > "$t" 2>/dev/null; then wc -c < "$t"; cat "$t"; else echo -; fi
done
printf '%s\\n' "$n"
`;

/**
 * Reads the ignore files at `paths` (relative to `root` inside the sandbox) in batches of
 * {@link IGNORE_FILES_PER_EXEC}: one exec for a usual tree, never one per file. Returns each
 * file's text (UTF-8, as a local walk reads it); a path that is missing or not a regular file
 * has no entry. A file over {@link MAX_IGNORE_FILE_BYTES} fails with `LIMIT_EXCEEDED` (only one
 * byte past the bound is ever read); an answer no real shell prints is `INTEGRITY`.
 */
export async function readIgnoreFiles(handle: SandboxHandle, root: string, paths: readonly string[]): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  const cap = MAX_IGNORE_FILE_BYTES + 1;
  for (const { items, encoding, args } of pathGroups(paths, (p) => p, IGNORE_FILES_PER_EXEC)) {
    const nonce = randomBytes(12).toString('hex');
    const maxOutputBytes = items.length * (cap + SIZE_LINE_BYTES) + SIZE_LINE_BYTES;
    const out = expectSuccess(
      handle,
      'the .gitignore read',
      await runShell(handle, IGNORE_READ_SCRIPT, [pathArg(root), nonce, String(cap), encoding, ...args], { maxOutputBytes }),
    ).stdout;
    let pos = 0;
    for (const relPath of items) {
      const nl = out.indexOf(0x0a, pos);
      if (nl < 0 || nl - pos > SIZE_LINE_BYTES) throw malformedAnswer('.gitignore read', 'a size line is missing');
      const head = out.toString('latin1', pos, nl).trim();
      pos = nl + 1;
      if (head === '-') continue;
      if (!/^\d{1,8}$/.test(head)) throw malformedAnswer('.gitignore read', 'a size is malformed');
      const size = Number(head);
      if (size > MAX_IGNORE_FILE_BYTES) throw ignoreFileTooLarge(relPath, size);
      if (pos + size > out.length) throw malformedAnswer('.gitignore read', 'a file is cut short');
      texts.set(relPath, out.toString('utf8', pos, pos + size));
      pos += size;
    }
    if (out.toString('latin1', pos) !== `${nonce}\n`) throw malformedAnswer('.gitignore read', 'the answer does not end with its nonce');
  }
  return texts;
}
