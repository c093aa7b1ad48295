/**
 * Shell completion scripts generated from the commander program: its commands, at every depth,
 * and each command's options (the program's global options everywhere), so a new command or
 * option completes without anyone editing a script. Arguments (paths, ids) complete as files.
 */
import type { Command, Option } from 'commander';
import { InputError } from '../errors.js';

/** The shells a completion script is generated for. */
export const COMPLETION_SHELLS = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

/** What completes at one command path: its subcommands and its options. */
interface CompletionNode {
  /** Command names from the program down, space-separated (`''` for the program itself). */
  readonly path: string;
  readonly subcommands: readonly { readonly name: string; readonly description: string }[];
  readonly options: readonly CompletionOption[];
}

interface CompletionOption {
  readonly long?: string;
  readonly short?: string;
  readonly takesValue: boolean;
  readonly description: string;
}

/** Commander's implicit command that prints a subcommand's help. */
const HELP_COMMAND = 'help';
/** Command names and flags go into shell code unquoted: only these characters may. */
const SHELL_WORD = /^-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*$/;

/** The completion script for `shell`, for the program `program` (named by `program.name()`). */
export function completionScript(program: Command, shell: CompletionShell): string {
  const name = program.name();
  checkWord(name);
  const nodes = completionNodes(program, program.options);
  if (shell === 'bash') return bashScript(name, nodes);
  if (shell === 'zsh') return zshScript(name, nodes);
  return fishScript(name, nodes);
}

/** Every command path of `command`, depth first, each with the global options of the program. */
function completionNodes(command: Command, globals: readonly Option[], path = ''): CompletionNode[] {
  const subcommands = command.commands.filter((sub) => !isHidden(sub));
  for (const sub of subcommands) checkWord(sub.name());
  const own = path === '' ? command.options : [...command.options, ...globals];
  const node: CompletionNode = {
    path,
    subcommands: subcommands.map((sub) => ({ name: sub.name(), description: sub.description() })),
    options: [
      ...own.filter((o) => !o.hidden).map(toCompletionOption),
      { long: '--help', short: '-h', takesValue: false, description: 'display help' },
    ],
  };
  const children = subcommands.flatMap((sub) => completionNodes(sub, globals, path === '' ? sub.name() : `${path} ${sub.name()}`));
  if (subcommands.length === 0) return [node, ...children];
  // Commander's `help [command]` at every level that has subcommands: it completes them.
  const help: CompletionNode = { path: path === '' ? HELP_COMMAND : `${path} ${HELP_COMMAND}`, subcommands: node.subcommands, options: [] };
  const withHelp = { ...node, subcommands: [...node.subcommands, { name: HELP_COMMAND, description: 'display help for a command' }] };
  return [withHelp, help, ...children];
}

function isHidden(command: Command): boolean {
  return (command as unknown as { _hidden?: boolean })._hidden === true;
}

function toCompletionOption(option: Option): CompletionOption {
  for (const flag of [option.long, option.short]) if (flag !== undefined) checkWord(flag);
  return {
    ...(option.long === undefined ? {} : { long: option.long }),
    ...(option.short === undefined ? {} : { short: option.short }),
    takesValue: option.required || option.optional,
    description: option.description,
  };
}

function checkWord(word: string): void {
  if (!SHELL_WORD.test(word)) {
    throw new InputError('INVALID_INPUT', `cannot complete ${JSON.stringify(word)}: command names and flags are letters, digits, - and _`, {
      data: { word },
    });
  }
}

function flagsOf(options: readonly CompletionOption[], valued?: boolean): string[] {
  return options
    .filter((o) => valued === undefined || o.takesValue === valued)
    .flatMap((o) => [o.long, o.short].filter((f) => f !== undefined));
}

/**
 * The shell functions bash and zsh share (their `case` is the same): `_NAME_subcommands PATH`
 * and `_NAME_options PATH` print the words at PATH, `_NAME_takes_value PATH FLAG` says whether
 * FLAG consumes the next word, and `_NAME_path WORD...` walks the words typed so far to the
 * command path they name.
 */
function sharedFunctions(fn: string, nodes: readonly CompletionNode[]): string {
  const cases = (pick: (node: CompletionNode) => string[]): string =>
    nodes.map((node) => `    '${node.path}') echo '${pick(node).join(' ')}' ;;`).join('\n');
  const valued = nodes.flatMap((node) => flagsOf(node.options, true).map((flag) => `'${node.path}|${flag}'`));
  return `${fn}_subcommands() {
  case "$1" in
${cases((node) => node.subcommands.map((s) => s.name))}
  esac
}

${fn}_options() {
  case "$1" in
${cases((node) => flagsOf(node.options))}
  esac
}

${fn}_takes_value() {
  case "$1|$2" in
    ${valued.length === 0 ? "'|'" : valued.join('|')}) return 0 ;;
  esac
  return 1
}

# The command path the words name: each word that is a subcommand of the path so far descends.
${fn}_path() {
  local at='' skip='' word sub
  for word in "$@"; do
    if [ -n "$skip" ]; then skip=''; continue; fi
    case "$word" in
      --*=*) continue ;;
      -*) if ${fn}_takes_value "$at" "$word"; then skip=1; fi; continue ;;
    esac
    for sub in $(${fn}_subcommands "$at"); do
      if [ "$sub" = "$word" ]; then at="\${at:+$at }$word"; break; fi
    done
  done
  printf '%s' "$at"
}`;
}

function bashScript(name: string, nodes: readonly CompletionNode[]): string {
  const fn = `_${name.replace(/-/g, '_')}`;
  return `# bash completion for ${name}, generated by \`${name} completion bash\`.
# Load it with: source <(${name} completion bash)   (or save it under ~/.local/share/bash-completion/completions/${name})
${sharedFunctions(fn, nodes)}

${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" at
  at="$(${fn}_path "\${COMP_WORDS[@]:1:COMP_CWORD-1}")"
  # The value of an option: complete files.
  if [ "$COMP_CWORD" -gt 1 ] && ${fn}_takes_value "$at" "$prev"; then COMPREPLY=(); return 0; fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(${fn}_options "$at")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -W "$(${fn}_subcommands "$at")" -- "$cur")
  fi
}

complete -o default -o bashdefault -F ${fn} ${name}
`;
}

function zshScript(name: string, nodes: readonly CompletionNode[]): string {
  const fn = `_${name.replace(/-/g, '_')}`;
  return `#compdef ${name}
# zsh completion for ${name}, generated by \`${name} completion zsh\`.
# Load it with: source <(${name} completion zsh)   (or save it as _${name} in a directory of $fpath)
${sharedFunctions(fn, nodes)}

${fn}() {
  # Not \`path\`: zsh ties it to PATH.
  local at subs
  at="$(${fn}_path "\${(@)words[2,CURRENT-1]}")"
  if (( CURRENT > 2 )) && ${fn}_takes_value "$at" "\${words[CURRENT-1]}"; then _files; return; fi
  if [[ "\${words[CURRENT]}" == -* ]]; then
    compadd -- \${=$(${fn}_options "$at")}
  else
    subs="$(${fn}_subcommands "$at")"
    if [[ -n "$subs" ]]; then compadd -- \${=subs}; else _files; fi
  fi
}

if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then
  ${fn} "$@"
else
  compdef ${fn} ${name}
fi
`;
}

/** A fish single-quoted string. */
function fishQuote(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function fishScript(name: string, nodes: readonly CompletionNode[]): string {
  const fn = `__${name.replace(/-/g, '_')}`;
  const subcommandCases = nodes
    .filter((node) => node.subcommands.length > 0)
    .map((node) => `    case ${fishQuote(node.path)}\n      printf '%s\\n' ${node.subcommands.map((s) => s.name).join(' ')}`)
    .join('\n');
  const valuedCases = nodes
    .filter((node) => flagsOf(node.options, true).length > 0)
    .map((node) => `    case ${fishQuote(node.path)}\n      contains -- $argv[2] ${flagsOf(node.options, true).join(' ')}; and return 0`)
    .join('\n');
  const lines: string[] = [];
  for (const node of nodes) {
    const at = `-n ${fishQuote(`test (${fn}_path) = ${fishQuote(node.path)}`)}`;
    for (const sub of node.subcommands) lines.push(`complete -c ${name} ${at} -f -a ${sub.name} -d ${fishQuote(sub.description)}`);
    for (const option of node.options) {
      const flags = [
        option.long === undefined ? '' : ` -l ${option.long.slice(2)}`,
        option.short === undefined ? '' : ` -s ${option.short.slice(1)}`,
      ].join('');
      lines.push(`complete -c ${name} ${at}${flags}${option.takesValue ? ' -r' : ''} -d ${fishQuote(option.description)}`);
    }
  }
  return `# fish completion for ${name}, generated by \`${name} completion fish\`.
# Load it with: ${name} completion fish | source   (or save it as ~/.config/fish/completions/${name}.fish)
function ${fn}_subcommands
  switch $argv[1]
${subcommandCases}
  end
end

function ${fn}_takes_value
  switch $argv[1]
${valuedCases}
  end
  return 1
end

# The command path the words typed so far name: each word that is a subcommand of the path so far descends.
function ${fn}_path
  set -l at ''
  set -l skip 0
  for word in (commandline -opc)[2..-1]
    if test $skip = 1
      set skip 0
      continue
    end
    switch $word
      case '--*=*'
        continue
      case '-*'
        ${fn}_takes_value "$at" $word; and set skip 1
        continue
    end
    if contains -- $word (${fn}_subcommands "$at")
      if test -z "$at"
        set at $word
      else
        set at "$at $word"
      end
    end
  end
  echo $at
end

${lines.join('\n')}
`;
}
