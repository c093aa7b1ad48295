import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { COMPLETION_SHELLS, completionScript } from './completion.js';
import { buildProgram } from './program.js';

describe('completionScript', () => {
  it('is generated from the program: a command or option added to it completes in every shell', () => {
    const program = buildProgram();
    program.command('frobnicate').description('a new command').option('--widget-count <n>', 'how many');
    for (const shell of COMPLETION_SHELLS) {
      const script = completionScript(program, shell);
      expect({ shell, command: script.includes('frobnicate') }).toEqual({ shell, command: true });
      expect({ shell, option: script.includes(shell === 'fish' ? '-l widget-count' : '--widget-count') }).toEqual({ shell, option: true });
    }
  });

  it('refuses a command name that is not a plain word (it would be shell code), INVALID_INPUT', () => {
    const program = new Command('holdfast');
    program.command("x';rm -rf ~;'");
    for (const shell of COMPLETION_SHELLS) {
      try {
        completionScript(program, shell);
        expect.unreachable();
      } catch (error) {
        expect(isHoldfastError(error, 'INVALID_INPUT')).toBe(true);
      }
    }
  });
});
