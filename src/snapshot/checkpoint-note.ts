import { InputError } from '../errors.js';
import { findSecret } from '../rules/secrets.js';

/** Characters a checkpoint label may have (UTF-16 code units, as JavaScript counts them). */
export const MAX_CHECKPOINT_LABEL_CHARS = 200;
/** Bytes of a checkpoint's `meta` as stored: its compact JSON text, UTF-8. */
export const MAX_CHECKPOINT_META_BYTES = 4096;
/** Keys a checkpoint's `meta` may have. */
export const MAX_CHECKPOINT_META_KEYS = 64;
/** Characters of one `meta` key. */
export const MAX_CHECKPOINT_META_KEY_CHARS = 64;

/** One value of a checkpoint's `meta`: flat, never an object or an array. */
export type CheckpointMetaValue = string | number | boolean | null;
/** A checkpoint's `meta`: a flat JSON object a caller attaches (a thread id, a run id, a snapshot's origin). */
export type CheckpointMeta = Readonly<Record<string, CheckpointMetaValue>>;

/** What a caller may attach to a checkpoint it asks for: a label and small flat metadata, both optional. */
export interface CheckpointNote {
  /** 1 to {@link MAX_CHECKPOINT_LABEL_CHARS} characters, no control or bidirectional-override characters. */
  readonly label?: string | undefined;
  /** See {@link checkedCheckpointNote} for the rules. */
  readonly meta?: CheckpointMeta | undefined;
}

/** Control characters (C0, DEL, C1) and the bidirectional overrides that make shown text lie. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused.
const UNSHOWABLE_RE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const KEY_RE = /^[A-Za-z0-9_][A-Za-z0-9._:@/-]*$/;

function invalid(field: string, message: string): InputError {
  return new InputError('INVALID_INPUT', `${field}: ${message}`, { data: { field } });
}

/** A string shown as text: refused with `SECRET_EXCLUDED` when a secret rule matches it. */
function refuseSecret(field: string, value: string): void {
  const finding = findSecret(Buffer.from(value, 'utf8'));
  if (finding === undefined) return;
  throw new InputError(
    'SECRET_EXCLUDED',
    `${field} looks like a credential (${finding.rule}); Holdfast never stores credentials: leave them out of checkpoint labels and metadata`,
    { data: { field, rule: finding.rule } },
  );
}

function checkedLabel(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_CHECKPOINT_LABEL_CHARS) {
    throw invalid('label', `a checkpoint label is 1-${MAX_CHECKPOINT_LABEL_CHARS} characters`);
  }
  if (UNSHOWABLE_RE.test(value)) throw invalid('label', 'a checkpoint label may not hold control or bidirectional-override characters');
  refuseSecret('label', value);
  return value;
}

function checkedValue(key: string, value: unknown): CheckpointMetaValue {
  const field = `meta.${key}`;
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw invalid(field, 'a number must be finite');
    return value;
  }
  if (typeof value !== 'string') throw invalid(field, 'meta is flat: each value is a string, a number, a boolean or null');
  if (UNSHOWABLE_RE.test(value)) throw invalid(field, 'a value may not hold control or bidirectional-override characters');
  refuseSecret(field, value);
  return value;
}

function checkedMeta(value: unknown): CheckpointMeta {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || Object.getPrototypeOf(value) !== Object.prototype) {
    throw invalid('meta', 'meta is a JSON object');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_CHECKPOINT_META_KEYS) throw invalid('meta', `meta has at most ${MAX_CHECKPOINT_META_KEYS} keys`);
  const out: Record<string, CheckpointMetaValue> = {};
  for (const [key, v] of entries) {
    if (key.length > MAX_CHECKPOINT_META_KEY_CHARS || !KEY_RE.test(key)) {
      throw invalid(
        'meta',
        `a meta key is 1-${MAX_CHECKPOINT_META_KEY_CHARS} of A-Z a-z 0-9 _ . : @ / -, not starting with a punctuation mark`,
      );
    }
    refuseSecret(`meta.${key}`, key);
    Object.defineProperty(out, key, { value: checkedValue(key, v), enumerable: true, writable: false });
  }
  const bytes = Buffer.byteLength(JSON.stringify(out), 'utf8');
  if (bytes > MAX_CHECKPOINT_META_BYTES) {
    throw new InputError('LIMIT_EXCEEDED', `meta is ${bytes} bytes as JSON; at most ${MAX_CHECKPOINT_META_BYTES} are kept`, {
      data: { field: 'meta', bytes, limit: MAX_CHECKPOINT_META_BYTES },
    });
  }
  return Object.freeze(out);
}

/**
 * Checks what a caller attaches to a checkpoint, before anything is recorded: `label` 1 to
 * {@link MAX_CHECKPOINT_LABEL_CHARS} characters; `meta` a flat JSON object (values strings,
 * finite numbers, booleans, null) of at most {@link MAX_CHECKPOINT_META_KEYS} keys of
 * 1 to {@link MAX_CHECKPOINT_META_KEY_CHARS} of `A-Z a-z 0-9 _ . : @ / -`, at most
 * {@link MAX_CHECKPOINT_META_BYTES} bytes as compact JSON (`LIMIT_EXCEEDED` above that). No
 * string may hold a control or bidirectional-override character (`INVALID_INPUT`), and none
 * may look like a credential by the built-in secret rules (`SECRET_EXCLUDED`, `data.field`
 * naming it): labels and metadata are shown and stored as they are. `undefined` and `null`
 * mean absent. Returns the note with only the fields given.
 */
export function checkedCheckpointNote(input: { readonly label?: unknown; readonly meta?: unknown }): CheckpointNote {
  const label = input.label === undefined || input.label === null ? undefined : checkedLabel(input.label);
  const meta = input.meta === undefined || input.meta === null ? undefined : checkedMeta(input.meta);
  return { ...(label === undefined ? {} : { label }), ...(meta === undefined ? {} : { meta }) };
}
