import type { Command } from 'commander';
import { COMPLETION_SHELLS, type CompletionShell, completionScript } from '../completion.js';
import { oneOf } from '../program.js';

/** `holdfast completion bash|zsh|fish`: prints a completion script generated from this program's commands and options. */
export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script (bash: source <(holdfast completion bash); fish: holdfast completion fish | source)')
    .argument('<shell>', `one of ${COMPLETION_SHELLS.join(', ')}`, oneOf('shell', COMPLETION_SHELLS))
    .action((shell: CompletionShell) => {
      process.stdout.write(completionScript(program, shell));
    });
}
