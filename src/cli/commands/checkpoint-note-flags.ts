import { printable } from '../../core/paths.js';
import { InputError } from '../../errors.js';
import type { Checkpoint } from '../../index.js';

/**
 * `--meta k=v` flags (repeatable) as the flat object a checkpoint's `meta` is: the value is
 * everything after the first `=`, a string. A flag without `=` or a key given twice is
 * `INVALID_INPUT`; the library checks the rest (`checkedCheckpointNote`). No flag: undefined.
 */
export function metaFlags(flags: readonly string[] | undefined): Record<string, string> | undefined {
  if (flags === undefined || flags.length === 0) return undefined;
  const meta: Record<string, string> = {};
  for (const flag of flags) {
    const at = flag.indexOf('=');
    if (at <= 0) throw new InputError('INVALID_INPUT', `--meta ${flag}: give key=value`, { data: { flag: '--meta' } });
    const key = flag.slice(0, at);
    if (Object.hasOwn(meta, key)) throw new InputError('INVALID_INPUT', `--meta ${key} is given twice`, { data: { flag: '--meta' } });
    Object.defineProperty(meta, key, { value: flag.slice(at + 1), enumerable: true, writable: true });
  }
  return meta;
}

/**
 * A checkpoint's label and metadata on one line for people (`label "L"  k=v, …`), or '' when
 * it has neither. Shown as text: control characters print as `?` whatever a stored row holds.
 */
export function noteText(c: Pick<Checkpoint, 'label' | 'meta' | 'forkedFrom'>): string {
  const parts: string[] = [];
  if (c.label !== null) parts.push(`label ${JSON.stringify(printable(c.label))}`);
  if (c.meta !== null && Object.keys(c.meta).length > 0) {
    parts.push(
      Object.entries(c.meta)
        .map(([k, v]) => `${printable(k)}=${printable(typeof v === 'string' ? v : JSON.stringify(v))}`)
        .join(', '),
    );
  }
  if (c.forkedFrom !== null) parts.push(`forked from ${c.forkedFrom}`);
  return parts.join('  ');
}
