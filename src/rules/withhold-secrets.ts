import { findSecret } from './secrets.js';

/** What replaces a string that holds a credential. */
export function withheldMarker(rule: string): string {
  return `[withheld: held a credential (${rule})]`;
}

/** Deepest nesting walked; deeper values are withheld whole (no answer of Holdfast's nests this far). */
const MAX_DEPTH = 64;

/**
 * A copy of the JSON value `value` in which every string that holds a credential (any content
 * rule of `findSecret`) is replaced by {@link withheldMarker}, and the rules that matched.
 * For what Holdfast keeps of text it did not write (a turn's output in an idempotency receipt,
 * a failed setup command's stderr): credentials never enter a receipt or a log.
 */
export function withholdSecrets(value: unknown): { readonly value: unknown; readonly withheld: readonly string[] } {
  const withheld: string[] = [];
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') {
      const finding = findSecret(Buffer.from(v, 'utf8'));
      if (finding === undefined) return v;
      withheld.push(finding.rule);
      return withheldMarker(finding.rule);
    }
    if (v === null || typeof v !== 'object') return v;
    if (depth >= MAX_DEPTH) {
      withheld.push('too-deep');
      return withheldMarker('too-deep');
    }
    if (Array.isArray(v)) return v.map((item) => walk(item, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(v)) out[k] = walk(item, depth + 1);
    return out;
  };
  return { value: walk(value, 0), withheld };
}
