/** How numbers and times read on the page. */

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** `1536` -> `1.5 KiB`. */
export function formatBytes(bytes: number | null | undefined): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) return '—';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

/** `1234` -> `1.23 s`, `45` -> `45 ms`, `125000` -> `2 min 5 s`. */
export function formatDuration(ms: number | null | undefined): string {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** How long ago `at` was, relative to `now`: `12 s ago`, `3 min ago`, `2 h ago`, `4 d ago`. */
export function formatAge(at: number | null | undefined, now = Date.now()): string {
  if (typeof at !== 'number') return '—';
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/** A time of day, with the date when it is not today. */
export function formatTime(at: number | null | undefined): string {
  if (typeof at !== 'number') return '—';
  const date = new Date(at);
  const sameDay = date.toDateString() === new Date().toDateString();
  return sameDay ? date.toLocaleTimeString() : date.toLocaleString();
}

/** The first 8 characters of an id, for tables (the full id is in the title and the link). */
export function shortId(id: string): string {
  return id.length > 12 ? id.slice(0, 8) : id;
}
