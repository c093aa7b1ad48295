/** Quotes one argument for a POSIX shell: `'…'`, a quote inside written as `'\''`. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
