// `berth run model <name> --data '{...}' [--path /v1/chat/completions]`: one call through the model
// gateway with the CLI's own credential. The answer's text is printed (a stream's as it arrives); `-o json` prints the
// provider's answer as it came instead (a stream's events as they are).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Api, ApiFailure } from './client.js';
import { type CliConfig, loadCliConfig } from './config.js';

interface RunModelOptions {
  data?: string;
  message?: string;
  path: string;
  method?: string;
  output?: string;
}

/** The text of an answer: OpenAI's chat or completion shapes, Anthropic's messages; undefined for any other. */
export function answerText(body: any): string | undefined {
  const choice = body?.choices?.[0];
  if (typeof choice?.message?.content === 'string') return choice.message.content;
  if (typeof choice?.text === 'string') return choice.text;
  if (Array.isArray(body?.content))
    return body.content
      .filter((c: any) => c?.type === 'text')
      .map((c: any) => c.text)
      .join('');
  return undefined;
}

/** The text one event of a stream adds (OpenAI's `delta.content`, Anthropic's `content_block_delta`). */
export function deltaText(event: any): string {
  const d = event?.choices?.[0]?.delta?.content;
  if (typeof d === 'string') return d;
  if (event?.type === 'content_block_delta' && typeof event.delta?.text === 'string') return event.delta.text;
  return '';
}

/** Prints the text of a server-sent-events stream as its `data:` events arrive. */
async function printStreamText(body: AsyncIterable<Uint8Array>) {
  const dec = new TextDecoder();
  let held = '';
  let wrote = false;
  const line = (l: string) => {
    if (!l.startsWith('data:')) return;
    const data = l.slice(5).trim();
    if (!data || data === '[DONE]') return;
    try {
      const text = deltaText(JSON.parse(data));
      if (text) {
        process.stdout.write(text);
        wrote = true;
      }
    } catch {}
  };
  for await (const chunk of body) {
    held += dec.decode(chunk, { stream: true });
    const cut = held.lastIndexOf('\n') + 1;
    for (const l of held.slice(0, cut).split('\n')) line(l);
    held = held.slice(cut);
  }
  line(held + dec.decode());
  if (wrote) process.stdout.write('\n');
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
  const raw = o.output === 'json';
  if (o.output !== undefined && !raw) throw new Error('run model takes -o json (the answer as it came)');
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    const answer = await res.json();
    const text = raw ? undefined : answerText(answer);
    process.stdout.write(text !== undefined ? `${text}\n` : `${JSON.stringify(answer, null, 2)}\n`);
    return;
  }
  if (!raw && type.includes('text/event-stream'))
    return printStreamText((res.body ?? []) as AsyncIterable<Uint8Array>);
  // Other answers (and streams with -o json) are printed chunk by chunk, as the provider sends them.
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
    .option('-o, --output <format>', 'json: the answer (or the stream) as the provider sent it')
    .action((name: string, o: RunModelOptions) => runModel(name, o));
}
