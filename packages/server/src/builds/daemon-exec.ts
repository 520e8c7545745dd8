// Runs a command through a sandbox's API daemon (POST /process over its unix socket) — the one way builds and
// replicas start processes, so nothing of the user's code ever runs on the host.
import { request } from 'node:http';
import type { ExecStreamEvent, ProcessJson, ProcessRequest } from '../sandbox-api/schema.js';

/** Reads NDJSON lines of a streamed exec, handing output to `onOutput`; resolves with the final process. */
export function execStreamed(
  socketPath: string,
  body: ProcessRequest,
  onOutput: (stream: 'stdout' | 'stderr', data: string) => void,
  signal?: AbortSignal,
): Promise<ProcessJson> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path: '/process',
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
        agent: false,
        signal,
      },
      (res) => {
        let buf = '';
        let result: ProcessJson | undefined;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line.trim()) continue;
            let ev: ExecStreamEvent;
            try {
              ev = JSON.parse(line);
            } catch {
              continue;
            }
            if (ev.type === 'stdout' || ev.type === 'stderr') onOutput(ev.type, ev.data);
            else if (ev.type === 'result') result = JSON.parse(ev.data);
          }
        });
        res.on('end', () => {
          if (res.statusCode !== 200)
            return reject(new Error(`the sandbox daemon answered ${res.statusCode}: ${buf.slice(0, 300)}`));
          if (!result) return reject(new Error('the sandbox daemon ended the exec stream without a result'));
          resolve(result);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** POST /process answered as JSON (start in the background, or wait for ports); returns the process. */
export function execJson(
  socketPath: string,
  body: ProcessRequest,
  signal?: AbortSignal,
): Promise<ProcessJson> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path: '/process',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        agent: false,
        signal,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          if (res.statusCode !== 200)
            return reject(new Error(`the sandbox daemon answered ${res.statusCode}: ${text.slice(0, 300)}`));
          resolve(JSON.parse(text) as ProcessJson);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** GET /process/{name}: the process as the daemon sees it now. */
export function processInfo(socketPath: string, name: string): Promise<ProcessJson | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: `/process/${encodeURIComponent(name)}`, method: 'GET', agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve(res.statusCode === 200 ? (JSON.parse(text) as ProcessJson) : undefined));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
