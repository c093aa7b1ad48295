/**
 * Deterministic randomness for the snapshot benchmark's workspaces: a seeded PRNG and a generator
 * of source-code-like text. The text is built from a skewed identifier vocabulary and a handful
 * of statement shapes, so it compresses roughly like real code (measured: about 4.5x for a
 * `zstd -3` stream of many files, about 3.2x for a single 10 KB file) without ever repeating whole
 * files, which would hand content-addressed tools dedup they would not get on a real workspace.
 */

/** A small, fast, seedable PRNG (sfc32 seeded through splitmix32). Same seed, same sequence. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** Seeds the generator; any 32-bit integer (and any string, through a hash) gives a stream. */
  constructor(seed: number | string) {
    let s = typeof seed === 'number' ? seed >>> 0 : hashString(seed);
    const split = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = split();
    this.b = split();
    this.c = split();
    this.d = split();
    for (let i = 0; i < 12; i += 1) this.next();
  }

  /** Next unsigned 32-bit integer. */
  next(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** Uniform integer in [min, max] (both inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.float() * (max - min + 1));
  }

  /** Integer in [min, max] drawn log-uniformly, so small values are as common per decade as large ones. */
  logInt(min: number, max: number): number {
    return Math.round(Math.exp(Math.log(min) + this.float() * (Math.log(max) - Math.log(min))));
  }

  /** A uniformly chosen element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.float() * items.length)];
    if (item === undefined) throw new Error('Rng.pick: empty list');
    return item;
  }

  /** A fresh generator whose stream depends on this one's seed and `label`, not on call order elsewhere. */
  fork(label: string): Rng {
    return new Rng((this.next() ^ hashString(label)) >>> 0);
  }

  /** Fisher-Yates shuffle of a copy of `items`. */
  shuffled<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i -= 1) {
      const j = Math.floor(this.float() * (i + 1));
      const tmp = out[i] as T;
      out[i] = out[j] as T;
      out[j] = tmp;
    }
    return out;
  }
}

/** FNV-1a of a string, as an unsigned 32-bit integer. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The words identifiers, comments and strings are made of. */
export const WORDS: readonly string[] = (
  'get set user config value index buffer stream request response handler error result state cache store item list map key ' +
  'node tree path file data event options context client server token session count size offset limit page query filter sort ' +
  'parse format render update create remove load save read write open close start stop init reset flush sync batch queue task ' +
  'job worker pool retry timeout signal abort stack frame scope module package version hash digest chunk block range entry ' +
  'record row column table schema field type kind name label time date duration status code message payload header body route ' +
  'method params args input output source target origin local remote pending active ready valid empty first last next prev ' +
  'parent child root leaf depth width height color style theme layout view model service provider factory builder adapter ' +
  'driver plugin hook listener observer emitter channel socket port host url link ref handle lock guard policy rule quota ' +
  'metric counter gauge trace span log debug info warn'
).split(' ');
const OPS = ['===', '!==', '<', '>', '<=', '>=', '&&', '||', '+', '-'];
const LITERALS = ['0', '1', '2', '-1', 'true', 'false', 'null', 'undefined', '[]', '{}', "''", '1024', '60_000'];
const VOCABULARY_SIZE = 600;
/** Names per file, and how often a name is drawn from them rather than from the whole vocabulary. */
const LOCAL_NAMES = 16;
const LOCAL_SHARE = 0.75;

/** Generates code-like text: TypeScript-shaped lines over a fixed, seeded vocabulary. */
export class CodeTextGenerator {
  private readonly identifiers: readonly string[];
  private readonly types: readonly string[];
  /** Identifiers of the file being generated; real files reuse a few names heavily. */
  private local: readonly string[] = [];

  /** Builds the vocabulary from `seed`; every generator with the same seed shares it. */
  constructor(seed: number) {
    const rng = new Rng(seed);
    const ids = new Set<string>();
    while (ids.size < VOCABULARY_SIZE) {
      const parts = Array.from({ length: rng.int(1, 3) }, () => rng.pick(WORDS));
      ids.add(parts.map((p, i) => (i === 0 ? p : capitalize(p))).join(''));
    }
    this.identifiers = [...ids];
    this.types = this.identifiers.slice(0, 400).map(capitalize);
  }

  /** At least `bytes` bytes of ASCII code-like text drawn from `rng` (a few imports, then lines until `bytes` is reached). */
  text(rng: Rng, bytes: number): string {
    this.local = Array.from({ length: LOCAL_NAMES }, () => this.globalId(rng));
    const lines: string[] = [];
    let size = 0;
    const push = (line: string) => {
      lines.push(line);
      size += line.length + 1;
    };
    for (let i = 0, imports = rng.int(1, 6); i < imports; i += 1) {
      push(`import { ${this.type(rng)}, ${this.id(rng)} } from './${this.id(rng)}.js';`);
    }
    let depth = 0;
    while (size < bytes) {
      const line = this.line(rng, depth);
      depth = Math.max(0, depth + line.delta);
      push(line.text);
    }
    return `${lines.join('\n')}\n`;
  }

  /** Exactly `bytes` bytes of code-like text (truncated mid-line when needed). */
  exact(rng: Rng, bytes: number): string {
    return this.text(rng, bytes).slice(0, bytes);
  }

  private id(rng: Rng): string {
    return rng.float() < LOCAL_SHARE ? rng.pick(this.local) : this.globalId(rng);
  }

  private globalId(rng: Rng): string {
    // Uniform to the fourth power: a few identifiers dominate, as in real code.
    const u = rng.float();
    return this.identifiers[Math.floor(u ** 4 * this.identifiers.length)] ?? 'value';
  }

  private type(rng: Rng): string {
    const u = rng.float();
    return this.types[Math.floor(u ** 4 * this.types.length)] ?? 'Value';
  }

  private expr(rng: Rng): string {
    switch (rng.int(0, 5)) {
      case 0:
        return this.id(rng);
      case 1:
        return `${this.id(rng)}.${this.id(rng)}`;
      case 2:
        return rng.pick(LITERALS);
      case 3:
        return `${this.id(rng)}(${this.id(rng)}, ${rng.pick(LITERALS)})`;
      case 4:
        return `'${this.words(rng, 1, 4)}'`;
      default:
        return `${this.id(rng)} ${rng.pick(OPS)} ${rng.pick(LITERALS)}`;
    }
  }

  private words(rng: Rng, min: number, max: number): string {
    return Array.from({ length: rng.int(min, max) }, () => WORDS[Math.floor(rng.float() ** 3 * WORDS.length)] ?? 'value').join(' ');
  }

  private line(rng: Rng, depth: number): { text: string; delta: number } {
    const ind = '  '.repeat(depth);
    const r = rng.int(0, depth === 0 ? 9 : 10);
    if (depth === 0 && r >= 3) {
      const params = `${this.id(rng)}: ${this.type(rng)}, ${this.id(rng)}: ${this.type(rng)}`;
      return { text: `\nexport function ${this.id(rng)}(${params}): ${this.type(rng)} {`, delta: 1 };
    }
    switch (r) {
      case 0:
        return { text: `${ind}const ${this.id(rng)} = ${this.expr(rng)};`, delta: 0 };
      case 1:
        return { text: `${ind}let ${this.id(rng)}: ${this.type(rng)} = ${this.expr(rng)};`, delta: 0 };
      case 2:
        return { text: `${ind}if (${this.id(rng)} ${rng.pick(OPS)} ${this.expr(rng)}) {`, delta: depth < 6 ? 1 : 0 };
      case 3:
        return {
          text: `${ind}/**\n${ind} * ${this.words(rng, 3, 10)}\n${ind} * @param ${this.id(rng)} - ${this.words(rng, 2, 6)}\n${ind} */`,
          delta: 0,
        };
      case 4:
        return { text: `${ind}${this.id(rng)}.${this.id(rng)}(${this.expr(rng)});`, delta: 0 };
      case 5:
        return { text: `${ind}for (const ${this.id(rng)} of ${this.id(rng)}.${this.id(rng)}) {`, delta: depth < 6 ? 1 : 0 };
      case 6:
        return { text: `${ind}throw new ${this.type(rng)}Error('${this.words(rng, 2, 6)}');`, delta: 0 };
      case 7:
        return { text: `${ind}return ${this.expr(rng)};`, delta: 0 };
      case 8:
        return { text: `${ind}${this.id(rng)} = ${this.expr(rng)};`, delta: 0 };
      default:
        return { text: `${'  '.repeat(Math.max(0, depth - 1))}}`, delta: -1 };
    }
  }
}

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
