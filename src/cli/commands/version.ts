import type { Command } from 'commander';
import { outputOf, packageVersion } from '../program.js';

/** `holdfast version`: this build's version (package.json) and the runtime it runs on; `--json` for scripts. */
export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('print the version (with --json: the version, Node.js, platform and architecture)')
    .action((_flags: unknown, command: Command) => {
      const output = outputOf(command);
      const info = { version: packageVersion(), node: process.versions.node, platform: process.platform, arch: process.arch };
      output.result(info, () => info.version);
    });
}
