// `berth run model <name> --data '{...}' [--path /v1/chat/completions]`: one call through the model
// gateway with the CLI's own credential, printed as it arrives (streams included).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Api, ApiFailure } from './client.js';
import { type CliConfig, loadCliConfig } from './config.js';

interface RunModelOptions {
  data?: string;
  message?: string;
  path: string;
  method?: string;
}

/** `{"a":1}`, `@file.json`, or `-` for stdin. */
export async function readData(data: string): Promise<string> {
  if (data === '-') {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  return data.startsWith('@') ? readFileSync(data.slice(1), 'utf8') : data;
}

/** The run address of a model: the server's origin + `/run/<workspace>/models/<name>`. */
export function modelRunUrl(cfg: CliConfig, workspace: string, name: string, path: string) {
  const origin = cfg.url.replace(/\/+$/, '').replace(/\/v0$/, '');
  return `${origin}/run/${encodeURIComponent(workspace)}/models/${encodeURIComponent(name)}${path.startsWith('/') ? path : `/${path}`}`;
}

async function runModel(name: string, o: RunModelOptions) {
  const cfg = loadCliConfig();
  // The model's own record says which workspace it lives in (the key's home one unless configured).
  const { body: model } = await new Api(cfg).call('GET', `/models/${encodeURIComponent(name)}`);
  const workspace = model?.metadata?.workspace ?? cfg.workspace ?? 'default';
  let body: string | undefined;
  if (o.data !== undefined) body = await readData(o.data);
  else if (o.message !== undefined)
    body = JSON.stringify({ messages: [{ role: 'user', content: o.message }] });
  if (body !== undefined) {
    try {
      JSON.parse(body);
    } catch (e) {
      throw new Error(`--data is not valid JSON: ${(e as Error).message}`);
    }
  }
  const method = (o.method ?? (body === undefined ? 'GET' : 'POST')).toUpperCase();
  const res = await fetch(modelRunUrl(cfg, workspace, name, o.path), {
    method,
    headers: {
      authorization: `Bearer ${cfg.apiKey}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body,
  });
  if (!res.ok) {
    const text = await res.text();
    let problem: any;
    try {
      problem = JSON.parse(text);
    } catch {
      problem = { detail: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    }
    throw new ApiFailure(res.status, problem);
  }
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    process.stdout.write(`${JSON.stringify(await res.json(), null, 2)}\n`);
    return;
  }
  // Streams are printed chunk by chunk, as the provider sends them.
  for await (const chunk of res.body ?? []) process.stdout.write(chunk);
}

export function registerRunModel(program: Command) {
  const run =
    program.commands.find((c) => c.name() === 'run') ?? program.command('run').description('call a workload');
  run
    .command('model')
    .description('call a model endpoint through the gateway (OpenAI-compatible chat by default)')
    .argument('<name>', 'model endpoint name')
    .option('-d, --data <json>', 'request body: JSON, @file.json, or - for stdin')
    .option('-m, --message <text>', 'shorthand for a one-message chat body')
    .option('--path <path>', 'provider path after the model address', '/v1/chat/completions')
    .option('-X, --method <method>', 'HTTP method (default POST with a body, GET without)')
    .action((name: string, o: RunModelOptions) => runModel(name, o));
}
