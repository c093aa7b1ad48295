import { InputError } from '../errors.js';
import { EXEC_SIGNALS, type ExecSignal } from './sandbox-provider.js';

/** What a caller-chosen sandbox id looks like: the rule provider names follow (`[a-z][a-z0-9-]{0,63}`). */
export const SANDBOX_ID_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;

/**
 * The id of a new sandbox: `spec.id` when it is well formed (`INVALID_INPUT` when it is not,
 * naming `provider`), else a fresh `sbx-<16 hex>` from `fresh`.
 */
export function checkedSandboxId(id: unknown, provider: string, fresh: () => string): string {
  if (id === undefined) return fresh();
  if (typeof id !== 'string' || !SANDBOX_ID_PATTERN.test(id)) {
    throw new InputError('INVALID_INPUT', `[${provider}] a sandbox id is 1-64 of a-z 0-9 -, starting with a letter`, {
      data: { provider, field: 'id' },
    });
  }
  return id;
}

/** `signal` when {@link ExecProcess.kill} delivers it (default `SIGKILL`); `INVALID_INPUT` otherwise. */
export function checkedSignal(signal: unknown): ExecSignal {
  if (signal === undefined) return 'SIGKILL';
  if (!(EXEC_SIGNALS as readonly unknown[]).includes(signal)) {
    throw new InputError('INVALID_INPUT', `kill takes one of ${EXEC_SIGNALS.join(', ')}`, { data: { signal: String(signal) } });
  }
  return signal as ExecSignal;
}

/** Names a label key may have. */
const LABEL_KEY_PATTERN = /^[A-Za-z0-9._/-]{1,128}$/;
/** Names an environment variable may have (what POSIX shells accept). */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Bounds on what a spec or an exec may carry, so records and argument lists stay small. */
const MAX_LABELS = 64;
const MAX_LABEL_VALUE_CHARS = 1024;
export const MAX_ENV_VARS = 256;
export const MAX_ENV_VALUE_CHARS = 128 * 1024;

/** Validates labels; returns a plain copy. Throws `INVALID_INPUT` or `LIMIT_EXCEEDED`. */
export function checkedLabels(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  return checkedMap('label', labels, LABEL_KEY_PATTERN, MAX_LABELS, MAX_LABEL_VALUE_CHARS);
}

/** Validates environment variables (of a spec or one exec); returns a plain copy. Throws `INVALID_INPUT` or `LIMIT_EXCEEDED`. */
export function checkedEnv(env: Readonly<Record<string, string>> | undefined): Record<string, string> {
  return checkedMap('environment variable', env, ENV_NAME_PATTERN, MAX_ENV_VARS, MAX_ENV_VALUE_CHARS);
}

/** Validates a label or env map against its bounds; returns a plain copy. */
function checkedMap(
  what: string,
  map: Readonly<Record<string, string>> | undefined,
  keyPattern: RegExp,
  maxEntries: number,
  maxValueChars: number,
): Record<string, string> {
  const entries = Object.entries(map ?? {});
  if (entries.length > maxEntries)
    throw new InputError('LIMIT_EXCEEDED', `at most ${maxEntries} ${what}s per sandbox`, { data: { maxEntries } });
  for (const [key, value] of entries) {
    if (!keyPattern.test(key) || typeof value !== 'string' || value.length > maxValueChars || value.includes('\0')) {
      throw new InputError(
        'INVALID_INPUT',
        `invalid ${what} ${JSON.stringify(key)}: names match ${keyPattern}, values are strings without NUL of at most ${maxValueChars} characters`,
        {
          data: { key },
        },
      );
    }
  }
  return Object.fromEntries(entries);
}
