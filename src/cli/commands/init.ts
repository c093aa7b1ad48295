import type { Command } from 'commander';
import { describeConfig } from '../../config.js';
import { contextOf } from '../program.js';

/** `holdfast init`: creates (or opens) the store, migrates it and proves a blob round trip. */
export function registerInit(program: Command): void {
  program
    .command('init')
    .description('create or open the store, apply migrations, and check that both backends work')
    .action(async (_options: unknown, command: Command) => {
      const { config, output } = contextOf(command);
      const { openHoldfast } = await import('../../index.js');
      const hf = await openHoldfast({ config });
      try {
        const check = await hf.selfCheck();
        const where = describeConfig(config);
        output.result({ ...where, schemaVersion: check.schemaVersion, check }, () =>
          [
            'Holdfast store ready',
            `  metadata  ${where.meta} (schema v${check.schemaVersion})`,
            `  blobs     ${where.blobs}`,
            `  check     wrote, read back and removed a ${check.probeBytes}-byte probe in ${check.durationMs} ms`,
          ].join('\n'),
        );
      } finally {
        await hf.close();
      }
    });
}
