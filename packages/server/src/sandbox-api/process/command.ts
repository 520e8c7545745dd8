// Decides how to run a command string: directly (argv split on blanks) when it is a plain word list, else through
// `/bin/sh -c`. Skipping the shell saves a fork+exec per call, which is most of an exec's round trip for `true`.
import { accessSync, constants, statSync } from 'node:fs';
import { resolve } from 'node:path';

export interface SpawnPlan {
  file: string;
  args: string[];
  shell: boolean;
  /** argv[0] as the command line wrote it, when `file` was resolved to a full path. */
  argv0?: string;
}

export const SHELL = '/bin/sh';
/** What execvp searches when the environment has no PATH. */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Characters that are only ever plain inside an argv word: anything else may mean something to a shell. */
const PLAIN = /^[A-Za-z0-9_\-./:@%+,=^]+$/;

/** Words a shell handles itself (builtins and keywords): running them as a program would change their meaning. */
const SHELL_WORDS = new Set([
  '.',
  ':',
  'alias',
  'bg',
  'break',
  'case',
  'cd',
  'command',
  'continue',
  'declare',
  'do',
  'done',
  'elif',
  'else',
  'esac',
  'eval',
  'exec',
  'exit',
  'export',
  'fg',
  'fi',
  'for',
  'function',
  'getopts',
  'hash',
  'if',
  'jobs',
  'let',
  'local',
  'read',
  'readonly',
  'return',
  'select',
  'set',
  'shift',
  'source',
  'then',
  'time',
  'trap',
  'type',
  'typeset',
  'ulimit',
  'umask',
  'unalias',
  'unset',
  'until',
  'wait',
  'while',
]);

export function planSpawn(command: string): SpawnPlan {
  const words = command.split(/[ \t]+/).filter(Boolean);
  const direct =
    words.length > 0 &&
    words.every((w) => PLAIN.test(w)) &&
    !SHELL_WORDS.has(words[0]) &&
    !words[0].includes('=');
  if (direct) return { file: words[0], args: words.slice(1), shell: false };
  return shellPlan(command);
}

/**
 * The program `file` names, searched in `path` as execvp would, or undefined. Done here because a failed execve
 * in the child costs far more than a stat here, and a PATH often lists several directories before /usr/bin.
 */
export function resolveProgram(file: string, path: string | undefined, cwd: string): string | undefined {
  if (file.includes('/')) return resolve(cwd, file);
  for (const dir of (path ?? DEFAULT_PATH).split(':')) {
    const candidate = resolve(cwd, dir || '.', file);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export function shellPlan(command: string): SpawnPlan {
  return { file: SHELL, args: ['-c', command], shell: true };
}
