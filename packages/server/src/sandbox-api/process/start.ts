// POST /process: start a command; answer at once, when it ends (waitForCompletion), when its ports listen
// (waitForPorts), or as an NDJSON stream of its output ending with the result (Accept: text/event-stream).
import type { ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { SandboxApi } from '../context.js';
import { badRequest, readJson, sendJson, streamHeaders, unprocessable } from '../http.js';
import { listeningPorts } from '../network/proc-net.js';
import type { Handler } from '../router.js';
import { checkProcessRequest } from '../schema.js';
import { type ManagedProcess, type ProcessSpec, SpawnError } from './managed-process.js';
import { buildSpec } from './spec.js';

/** Between keepalive lines of a streamed exec, so idle proxies in between do not cut it. */
export const STREAM_KEEPALIVE_MS = 15_000;
/** How often waitForPorts looks at /proc/net/tcp: a replica starting from zero waits for its port this way, and
 * half the period is added to its first request on average (reading the file costs well under a millisecond). */
export const PORT_POLL_MS = 10;
/** waitForPorts gives up (answering the still running process) after this long, unless the process timeout is set. */
export const WAIT_FOR_PORTS_MAX_MS = 120_000;

export function startProcess(api: SandboxApi): Handler {
  return async ({ req, res }) => {
    const check = checkProcessRequest(await readJson(req));
    if (!check.ok) throw badRequest(check.reason);
    const r = check.value;
    const p = launch(api, await buildSpec(api, r));
    const accept = req.headers.accept ?? '';
    if (accept.includes('text/event-stream') || accept.includes('application/x-ndjson'))
      return streamExec(res, p);
    if (r.waitForCompletion) await p.final;
    else if (r.waitForPorts?.length) await waitForPorts(p, r.waitForPorts);
    sendJson(res, 200, p.toJson());
  };
}

export function launch(api: SandboxApi, spec: ProcessSpec): ManagedProcess {
  try {
    return api.processes.start(spec);
  } catch (err) {
    if (err instanceof SpawnError) throw unprocessable(err.message);
    throw err;
  }
}

/** Resolves once every port listens, the process ends, or the wait bound passes. */
export async function waitForPorts(p: ManagedProcess, ports: number[]): Promise<void> {
  const bound = p.spec.timeoutMs > 0 ? p.spec.timeoutMs : WAIT_FOR_PORTS_MAX_MS;
  const deadline = Date.now() + bound;
  let ended = false;
  p.final.then(() => {
    ended = true;
  });
  while (!ended && Date.now() < deadline) {
    const open = await listeningPorts();
    if (ports.every((port) => open.has(port))) return;
    await new Promise((r) => setTimeout(r, PORT_POLL_MS));
  }
}

async function streamExec(res: ServerResponse, p: ManagedProcess): Promise<void> {
  res.writeHead(200, streamHeaders('application/x-ndjson'));
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  const line = (type: string, data: string) => res.write(`${JSON.stringify({ type, data })}\n`);
  // Raw chunks, newlines kept: a prompt without a newline reaches the client as soon as it is written.
  const unfollow = p.logs.follow(
    (stream, data) => {
      const text = decoders[stream].write(data);
      if (text) line(stream, text);
    },
    () => {},
  );
  const keepalive = setInterval(() => line('keepalive', ''), STREAM_KEEPALIVE_MS);
  let gone = false;
  res.once('close', () => {
    gone = true;
    unfollow();
    clearInterval(keepalive);
  });
  await p.final;
  clearInterval(keepalive);
  unfollow();
  if (gone) return;
  for (const stream of ['stdout', 'stderr'] as const) {
    const rest = decoders[stream].end();
    if (rest) line(stream, rest);
  }
  res.end(`${JSON.stringify({ type: 'result', data: JSON.stringify(p.toJson()) })}\n`);
}
