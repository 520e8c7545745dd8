// `berth sandbox exec <name> -- cmd...`: runs a command in the sandbox, prints its output as it comes
// (the NDJSON stream of POST /process) and exits with the command's own exit code. `-i` hands it this command's
// standard input (read to its end first); `-t` runs it on a terminal instead (the PTY of `sandbox shell`), and `-it`
// makes that terminal interactive, as `docker exec -it` does.
import type { ExecStreamEvent, ProcessJson, ProcessRequest } from '@berth/server/sandbox-api/schema.js';
import type { Command } from 'commander';
import { loadCliConfig } from './config.js';
import { parseEnvs } from './flags.js';
import { failure, openSandbox } from './sandbox-client.js';
import { terminal } from './sandbox-shell.js';

/** Exit code when the command could not be run at all (as a shell says for "command not found"). */
const NOT_RUN = 127;

/** Quotes one argv word for `sh -c` when it holds anything a shell would interpret. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_\-./:@%+,=^]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** One word is taken as a shell command line as it is; several are quoted and joined. */
export const commandLine = (argv: string[]) => (argv.length === 1 ? argv[0] : argv.map(shellQuote).join(' '));

export function registerSandboxExec(sandbox: Command) {
  sandbox
    .command('exec')
    .description('run a command in a sandbox (e.g. `berth sandbox exec box -- ls -la /`)')
    .argument('<name>', 'sandbox name')
    .argument('<command...>', 'the command and its arguments (after --)')
    .option('-w, --workdir <dir>', 'working directory inside the sandbox')
    .option('-e, --env <KEY=VALUE...>', 'extra environment variables')
    .option('-i, --interactive', "give the command this command's standard input")
    .option('-t, --tty', 'run it on a terminal (with -i: an interactive one)')
    .action(async (name: string, argv: string[], o: ExecOptions) => {
      const cfg = loadCliConfig();
      const envs = parseEnvs(o.env);
      if (o.tty) {
        const exports = envs.map((e) => `export ${e.name}=${shellQuote(e.value)}; `).join('');
        process.exitCode = await terminal(cfg, name, {
          workdir: o.workdir,
          command: `${exports}${commandLine(argv)}`,
          input: o.interactive === true,
        });
        return;
      }
      const sb = await openSandbox(cfg, name);
      const env = Object.fromEntries(envs.map((e) => [e.name, e.value]));
      const stdin = o.interactive ? await readAll(process.stdin) : undefined;
      const res = await fetch(`${sb.url}/process`, {
        method: 'POST',
        headers: { ...sb.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({
          command: commandLine(argv),
          waitForCompletion: true,
          ...(o.workdir ? { workingDir: o.workdir } : {}),
          ...(Object.keys(env).length ? { env } : {}),
          ...(stdin !== undefined ? { stdin } : {}),
        } satisfies ProcessRequest),
      });
      if (!res.ok || !res.body) throw await failure(res, 'exec');
      const result = await printStream(res.body);
      process.exitCode = result?.exitCode ?? NOT_RUN;
    });
}

interface ExecOptions {
  workdir?: string;
  env?: string[];
  interactive?: boolean;
  tty?: boolean;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes stdout/stderr chunks as they arrive; returns the final process (the `result` line). */
async function printStream(body: ReadableStream<Uint8Array>): Promise<ProcessJson | undefined> {
  const decoder = new TextDecoder();
  let buffer = '';
  let result: ProcessJson | undefined;
  const handle = (line: string) => {
    if (!line.trim()) return;
    const msg = JSON.parse(line) as ExecStreamEvent;
    if (msg.type === 'stdout') process.stdout.write(msg.data);
    else if (msg.type === 'stderr') process.stderr.write(msg.data);
    else if (msg.type === 'result') result = JSON.parse(msg.data);
  };
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl = buffer.indexOf('\n');
    while (nl >= 0) {
      handle(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf('\n');
    }
  }
  handle(buffer + decoder.decode());
  return result;
}
