import type { Output } from './output.js';

/** A progress display for one long operation. */
export interface Progress {
  update(done: number, total: number, detail?: string): void;
  stop(): void;
}

/** Plain-line progress is printed at most this often without a TTY. */
const PLAIN_INTERVAL_MS = 2000;

/**
 * Progress on stderr: a bar on a TTY, a plain line every few seconds otherwise, nothing with
 * `--json` (stdout stays a single JSON document). cli-progress loads only on a TTY.
 */
export async function startProgress(output: Output, label: string, unit: 'bytes' | 'items' = 'bytes'): Promise<Progress> {
  if (output.json) return { update() {}, stop() {} };
  const format = (n: number): string => (unit === 'bytes' ? formatBytes(n) : String(n));
  if (!process.stderr.isTTY) {
    let last = Date.now();
    return {
      update(done, total, detail) {
        const now = Date.now();
        if (now - last < PLAIN_INTERVAL_MS) return;
        last = now;
        process.stderr.write(`${label}: ${format(done)} / ${format(total)}${detail === undefined ? '' : ` ${detail}`}\n`);
      },
      stop() {},
    };
  }
  const { default: cliProgress } = await import('cli-progress');
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} [{bar}] {percentage}% {doneText}/{totalText} {detail}`,
      stream: process.stderr,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(1, 0, { doneText: '0', totalText: '?', detail: '' });
  return {
    update(done, total, detail) {
      bar.setTotal(Math.max(total, 1));
      bar.update(done, { doneText: format(done), totalText: format(total), detail: detail ?? '' });
    },
    stop() {
      bar.stop();
    },
  };
}

/** 1536 -> "1.5 KiB". */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}
