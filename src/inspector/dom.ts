/**
 * Building the page without markup: every node is made with `createElement` and every piece of
 * data goes in as `textContent` or an attribute value, so a file name such as
 * `<img src=x onerror=alert(1)>` is shown as the characters it is, never parsed.
 */

/** Attributes and listeners of {@link h}: strings set attributes; `on*` functions listen. */
export type Props = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/** A child: a node, text (set as a text node), or nothing. */
export type Child = Node | string | number | null | undefined | false;

/**
 * An element with `props` and `children`. A `false`, `null` or `undefined` attribute is left
 * out, `true` is present and empty; `onclick` and the like add listeners.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, '');
    else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

/** Appends `children` to `parent` (text as text nodes). */
export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/** Replaces every child of `parent` with `children`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild !== null) parent.removeChild(parent.firstChild);
  append(parent, children);
}

/** A link inside the page (`#/…`). */
export function link(hash: string, text: string, props: Props = {}): HTMLAnchorElement {
  return h('a', { href: hash, ...props }, text);
}

/** A live region message (`role=status`, or `role=alert` for errors). */
export function message(text: string, kind: 'info' | 'error' = 'info'): HTMLParagraphElement {
  return h('p', { class: `msg msg-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** A table with a caption, a header row and body rows; wrapped so it scrolls sideways on a narrow window. */
export function table(caption: string, headers: readonly (string | HTMLElement)[], rows: readonly HTMLTableRowElement[]): HTMLDivElement {
  const head = h('tr', {}, ...headers.map((x) => (typeof x === 'string' ? h('th', { scope: 'col' }, x) : x)));
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h('table', {}, h('caption', {}, caption), h('thead', {}, head), h('tbody', {}, ...rows)),
  );
}
