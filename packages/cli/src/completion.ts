// `berth completion bash|zsh`: prints a completion script built from the command tree itself (commands,
// subcommands, each command's flags, kind names after get/delete), so it never lags behind the CLI.
// bash: `source <(berth completion bash)`; zsh: `source <(berth completion zsh)` (it uses bashcompinit).
import { KINDS } from '@berth/sdk';
import type { Command } from 'commander';

/** What completes after a command path (``, `sandbox`, `sandbox exec`): its subcommands, and its flags. */
export function completionTable(root: Command): Map<string, { subs: string[]; flags: string[] }> {
  const out = new Map<string, { subs: string[]; flags: string[] }>();
  const visit = (cmd: Command, path: string[]) => {
    out.set(path.join(' '), {
      subs: cmd.commands.flatMap((c) => [c.name(), ...c.aliases()]),
      flags: [
        ...cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => !!f)),
        ...(path.length ? ['--help'] : ['--version', '--help']),
      ],
    });
    for (const c of cmd.commands) for (const n of [c.name(), ...c.aliases()]) visit(c, [...path, n]);
  };
  visit(root, []);
  return out;
}

/** Words completed where a command wants a value, by command path. */
const ARGUMENT_WORDS = (): Record<string, string[]> => {
  const kinds = [...new Set(KINDS.flatMap((k) => [k.plural, ...k.aliases]))].sort();
  return {
    get: [...kinds, 'quotas', 'revisions', 'executions'].sort(),
    describe: kinds,
    delete: kinds,
    completion: ['bash', 'zsh'],
  };
};

/** Only what a word list may hold; nothing that a shell would interpret inside single quotes. */
const words = (ws: string[]) => ws.filter((w) => /^[\w./:-]+$/.test(w)).join(' ');

export function bashScript(root: Command): string {
  const t = completionTable(root);
  const args = ARGUMENT_WORDS();
  const paths = [...t.keys()].filter(Boolean);
  const lines = [...t].map(
    ([path, { subs, flags }]) =>
      `    '${path}') subs='${words([...subs, ...(args[path] ?? [])])}'; flags='${words(flags)}' ;;`,
  );
  return `# berth shell completion (bash). Load it with: source <(berth completion bash)
_berth() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path="" subs="" flags="" i w
  # The command path typed so far: the leading words that name commands (flags skipped).
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "\${path:+$path }$w" in
${paths.map((p) => `      '${p}') path="\${path:+$path }$w" ;;`).join('\n')}
      *) break ;;
    esac
  done
  case "$path" in
${lines.join('\n')}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ "$prev" != -* && -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    # A flag's value (-f file.yaml) or an argument the CLI cannot know: file names.
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
complete -o default -F _berth berth
`;
}

export function zshScript(root: Command): string {
  return `# berth shell completion (zsh). Load it with: source <(berth completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bashScript(root).split('\n').slice(1).join('\n')}`;
}

export function registerCompletion(program: Command) {
  program
    .command('completion')
    .description('print a shell completion script: source <(berth completion bash)')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell === 'bash') process.stdout.write(bashScript(program));
      else if (shell === 'zsh') process.stdout.write(zshScript(program));
      else throw new Error(`no completion for ${JSON.stringify(shell)}: use bash or zsh`);
    });
}
