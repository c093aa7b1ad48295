/**
 * What the configuration files share to refuse a value: the `INVALID_INPUT` naming a variable,
 * the first issue of a failed parse, and URLs with their password hidden.
 */
import type { z } from 'zod';
import { InputError } from './errors.js';

/** `INVALID_INPUT` for `variable=value`, its password hidden, with a valid example. */
export function configInvalid(variable: string, value: string, problem: string, example: string): InputError {
  return new InputError('INVALID_INPUT', `${variable}=${redactUrl(value)}: ${problem}. Example: ${variable}=${example}`, {
    data: { variable, field: variable },
  });
}

/** The issue an error reports: zod lists them in input order. */
export function firstIssue(error: z.ZodError): z.core.$ZodIssue {
  const [issue] = error.issues;
  if (issue === undefined) throw new TypeError('a failed parse without issues');
  return issue;
}

/** Replaces any password in a URL with `***`, for messages and logs. */
export function redactUrl(value: string): string {
  return value.replace(/(\/\/[^:/@]+:)[^@/]*@/, '$1***@');
}
