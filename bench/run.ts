import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `npm run bench`: runs every benchmark in its own process (so one's memory and caches do not
 * colour the next) and prints their tables. Arguments (e.g. `--json`) are passed on.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const BENCHES = ['metadata-insert.ts', 'blob-throughput.ts', 'snapshot.ts', 'endpoints.ts', 'recovery.ts', 'turn-cost.ts'];

let failed = 0;
for (const bench of BENCHES) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(here, bench), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  if (run.status !== 0) {
    process.stderr.write(`bench ${bench} failed (exit ${run.status})\n`);
    failed += 1;
  }
}
process.exitCode = failed === 0 ? 0 : 1;
