// A Dockerfile as the build engine runs it: stages of typed instructions, parsed with dockerfile-ast (the parser of
// the Docker language server: escape directive, continuations, comments, flags) and checked here. What Berth does not
// do is refused by name before anything runs, never skipped: HEALTHCHECK, SHELL, VOLUME, ONBUILD, STOPSIGNAL,
// heredocs, RUN --mount, COPY --link... Arguments stay raw: variables are expanded when the step runs (words.ts).
import { DockerfileParser, type Instruction } from 'dockerfile-ast';

export type CommandForm = { shell: string } | { exec: string[] };

interface Base {
  /** 1-based line of the instruction, for messages. */
  line: number;
  /** The instruction as written (continuations joined), for the log, the history and the cache key. */
  text: string;
}

export type Step = Base &
  (
    | { kind: 'RUN'; command: CommandForm }
    | { kind: 'COPY' | 'ADD'; sources: string[]; dest: string; from?: string; chmod?: string; chown?: string }
    | { kind: 'ENV' | 'LABEL'; pairs: Array<[string, string]> }
    | { kind: 'ARG'; name: string; value?: string }
    | { kind: 'WORKDIR' | 'USER'; value: string }
    | { kind: 'EXPOSE'; ports: string }
    | { kind: 'CMD' | 'ENTRYPOINT'; command: CommandForm }
    | { kind: 'MAINTAINER'; value: string }
  );

export interface Stage {
  /** The image it starts from, raw (may use the global ARGs): a name, `scratch`, or an earlier stage's name. */
  from: string;
  /** `AS name`, lower-cased as Docker compares it. */
  name?: string;
  index: number;
  line: number;
  text: string;
  steps: Step[];
}

export interface ParsedDockerfile {
  /** ARGs before the first FROM: usable in FROM lines only, unless a stage declares them again. */
  globalArgs: Array<{ name: string; value?: string; line: number }>;
  stages: Stage[];
  escape: string;
  /** Things the build says it leaves aside (a `# syntax=` directive): written to the log, never silent. */
  notes: string[];
}

export class DockerfileError extends Error {
  override name = 'DockerfileError';
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(line ? `Dockerfile line ${line}: ${message}` : message);
  }
}

/** Instructions Berth does not build, with why or what to do instead. */
const REFUSED: Record<string, string> = {
  HEALTHCHECK: 'health checks are not run by Berth (a sandbox or replica is checked through its own API)',
  SHELL:
    'the shell of RUN, CMD and ENTRYPOINT is always /bin/sh -c (use the exec form ["bash", "-c", "..."])',
  VOLUME: 'volumes are attached to sandboxes and workloads (spec.volumes), not declared by images',
  ONBUILD: 'triggers for later builds are not kept',
  STOPSIGNAL: 'the stop signal is not configurable',
};
const ALLOWED_FLAGS: Record<string, string[]> = {
  FROM: ['platform'],
  COPY: ['from', 'chown', 'chmod'],
  ADD: ['chown', 'chmod'],
};

const lineOf = (i: Instruction) => i.getRange().start.line + 1;

function textOf(i: Instruction): string {
  const flags =
    'getFlags' in i ? (i as any).getFlags().map((f: any) => `--${f.getName()}=${f.getValue() ?? ''}`) : [];
  return [i.getKeyword(), ...flags, i.getArgumentsContent() ?? ''].join(' ').trim();
}

function flagsOf(i: Instruction): Map<string, string> {
  const out = new Map<string, string>();
  if (!('getFlags' in i)) return out;
  const allowed = ALLOWED_FLAGS[i.getKeyword()] ?? [];
  for (const f of (i as any).getFlags()) {
    const name = f.getName() as string;
    if (!allowed.includes(name))
      throw new DockerfileError(`${i.getKeyword()} --${name} is not supported`, lineOf(i));
    out.set(name, f.getValue() ?? '');
  }
  return out;
}

/** The JSON array of an exec form, or undefined when the text is a shell form (as Docker decides). */
function execForm(content: string): string[] | undefined {
  if (!content.trimStart().startsWith('[')) return undefined;
  try {
    const v = JSON.parse(content);
    return Array.isArray(v) && v.every((s) => typeof s === 'string') ? v : undefined;
  } catch {
    return undefined;
  }
}

function command(i: Instruction): CommandForm {
  const content = i.getArgumentsContent() ?? '';
  if (/^\s*<<-?\s*["']?[A-Za-z_]/.test(i.getRawArgumentsContent() ?? ''))
    throw new DockerfileError(`${i.getKeyword()} with a heredoc is not supported`, lineOf(i));
  const exec = execForm(content);
  if (exec) return { exec };
  if (!content.trim()) throw new DockerfileError(`${i.getKeyword()} needs a command`, lineOf(i));
  return { shell: content };
}

function pairs(i: Instruction): Array<[string, string]> {
  const props = (i as any).getProperties?.() ?? [];
  if (!props.length) throw new DockerfileError(`${i.getKeyword()} needs name=value`, lineOf(i));
  return props.map((p: any) => {
    const value = p.getUnescapedValue();
    if (value === null) throw new DockerfileError(`${i.getKeyword()} ${p.getName()} has no value`, lineOf(i));
    return [p.getName(), value] as [string, string];
  });
}

function copyStep(i: Instruction, kind: 'COPY' | 'ADD'): Step {
  const flags = flagsOf(i);
  const content = i.getArgumentsContent() ?? '';
  const words = execForm(content) ?? i.getArguments().map((a) => a.getValue());
  if (words.length < 2) throw new DockerfileError(`${kind} needs a source and a destination`, lineOf(i));
  return {
    kind,
    line: lineOf(i),
    text: textOf(i),
    sources: words.slice(0, -1),
    dest: words[words.length - 1],
    ...(flags.has('from') ? { from: flags.get('from') } : {}),
    ...(flags.has('chmod') ? { chmod: flags.get('chmod') } : {}),
    ...(flags.has('chown') ? { chown: flags.get('chown') } : {}),
  };
}

function step(i: Instruction): Step {
  const kind = i.getKeyword();
  const base = { line: lineOf(i), text: textOf(i) };
  const one = () => {
    const v = i.getArgumentsContent()?.trim();
    if (!v) throw new DockerfileError(`${kind} needs a value`, lineOf(i));
    return v;
  };
  switch (kind) {
    case 'RUN':
      flagsOf(i);
      return { kind, ...base, command: command(i) };
    case 'CMD':
    case 'ENTRYPOINT':
      return { kind, ...base, command: command(i) };
    case 'COPY':
    case 'ADD':
      return copyStep(i, kind);
    case 'ENV':
    case 'LABEL':
      return { kind, ...base, pairs: pairs(i) };
    case 'ARG': {
      const p = (i as any).getProperty?.();
      if (!p?.getName()) throw new DockerfileError('ARG needs a name', lineOf(i));
      const value = p.getUnescapedValue();
      return { kind, ...base, name: p.getName(), ...(value !== null ? { value } : {}) };
    }
    case 'WORKDIR':
    case 'USER':
      return { kind, ...base, value: one() };
    case 'EXPOSE':
      return { kind, ...base, ports: one() };
    case 'MAINTAINER':
      return { kind, ...base, value: one() };
    default:
      if (REFUSED[kind]) throw new DockerfileError(`${kind} is not supported: ${REFUSED[kind]}`, lineOf(i));
      throw new DockerfileError(`unknown instruction ${JSON.stringify(i.getInstruction())}`, lineOf(i));
  }
}

export function parseDockerfile(text: string): ParsedDockerfile {
  const df = DockerfileParser.parse(text);
  const notes: string[] = [];
  for (const d of df.getDirectives()) {
    const name = d.getName()?.toLowerCase();
    if (name === 'syntax')
      notes.push(
        `the syntax directive (${d.getValue()}) is ignored: Berth's own builder reads this Dockerfile`,
      );
  }
  const out: ParsedDockerfile = { globalArgs: [], stages: [], escape: df.getEscapeCharacter(), notes };
  for (const i of df.getInstructions()) {
    const kind = i.getKeyword();
    if (kind === 'FROM') {
      const flags = flagsOf(i);
      const args = i.getArguments().map((a) => a.getValue());
      if (args.length !== 1 && !(args.length === 3 && args[1].toLowerCase() === 'as'))
        throw new DockerfileError('FROM takes an image and optionally AS <name>', lineOf(i));
      const platform = flags.get('platform');
      if (platform && platform !== 'linux/amd64' && platform !== 'linux/arm64' && !platform.startsWith('$'))
        throw new DockerfileError(
          `FROM --platform=${platform}: only this host's platform is built`,
          lineOf(i),
        );
      const name = args[2]?.toLowerCase();
      if (name && out.stages.some((s) => s.name === name))
        throw new DockerfileError(`stage name ${name} is used twice`, lineOf(i));
      out.stages.push({
        from: args[0],
        ...(name ? { name } : {}),
        index: out.stages.length,
        line: lineOf(i),
        text: textOf(i),
        steps: [],
      });
      continue;
    }
    const s = step(i);
    const stage = out.stages.at(-1);
    if (!stage) {
      if (s.kind !== 'ARG') throw new DockerfileError(`${kind} before the first FROM`, s.line);
      out.globalArgs.push({ name: s.name, value: s.value, line: s.line });
    } else stage.steps.push(s);
  }
  if (!out.stages.length) throw new DockerfileError('the Dockerfile has no FROM');
  return out;
}
