/** What every view gets and gives back. */
import type { WhoAmI } from './model.js';

/** The signed-in token, and where the view draws. */
export interface ViewContext {
  readonly who: WhoAmI;
  /** The `<main>` element; the view owns its children until disposed. */
  readonly main: HTMLElement;
  /** The hash route's query (`#/runs/ID?path=…`). */
  readonly params: URLSearchParams;
}

/** A drawn view: `dispose` stops its timers and requests when the route changes. */
export interface View {
  dispose(): void;
}

/** Sets the document title and the view's heading text. */
export function titled(text: string): void {
  document.title = `${text} · Holdfast inspector`;
}

/** `#/path?query` from parts, skipping empty values. */
export function route(path: string, query: Record<string, string | null | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') search.set(k, v);
  const qs = search.toString();
  return `#/${path}${qs === '' ? '' : `?${qs}`}`;
}
