// A stand-in for the sandbox API daemon in runtime tests: /health, /exec (sh -c) and /env on the
// unix socket named by BERTH_SANDBOX_SOCKET. Written to a code dir that the driver binds at /opt/berth.
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DAEMON_ENTRY } from '../host.js';

const DAEMON = `
const http = require('node:http');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const sock = process.env.BERTH_SANDBOX_SOCKET;
// The env contract: the spec's envs may arrive after start (warm pool), in BERTH_SANDBOX_ENV_FILE.
const envOf = () => {
  try { return { ...process.env, ...JSON.parse(fs.readFileSync(process.env.BERTH_SANDBOX_ENV_FILE, 'utf8')) }; }
  catch { return process.env; }
};
try { fs.unlinkSync(sock); } catch {}
let healthCalls = 0;
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const reply = (code, obj) => { res.writeHead(code, { 'content-type': 'application/json' }); res.end(JSON.stringify(obj)); };
    if (req.url === '/health') return reply(200, { ok: true, pid: process.pid, calls: ++healthCalls });
    if (req.url === '/env') return reply(200, envOf());
    if (req.url === '/exec' && req.method === 'POST') {
      const { cmd, detached } = JSON.parse(body);
      if (detached) {
        const c = spawn('/bin/sh', ['-c', cmd], { detached: true, stdio: 'ignore', env: envOf() });
        c.on('error', () => {});
        c.unref();
        return reply(200, { pid: c.pid });
      }
      const c = spawn('/bin/sh', ['-c', cmd], { env: envOf() });
      let out = '', err = '';
      c.stdout.on('data', (d) => (out += d));
      c.stderr.on('data', (d) => (err += d));
      c.on('error', (e) => reply(500, { error: String(e) }));
      c.on('close', (code, signal) => reply(200, { code, signal, stdout: out, stderr: err }));
      return;
    }
    reply(404, {});
  });
});
// A test may make a cold start slow (the spec's envs reach a cold start's daemon, not a warm one's).
setTimeout(() => server.listen(sock, () => {
  fs.chmodSync(sock, 0o666); // as the real daemon does, right after listening
  process.stdout.write(JSON.stringify({ event: 'listening', socket: sock }) + '\\n');
}), Number(process.env.MINI_DAEMON_LISTEN_AFTER_MS ?? 0));
`;

/** Creates a code dir holding the daemon at DAEMON_ENTRY (the path the driver runs by default). */
export function makeMiniDaemonCodeDir(parent = tmpdir()): string {
  const dir = mkdtempSync(join(parent, 'berth-code-'));
  chmodSync(dir, 0o755); // the sandbox's unprivileged uid must read it, like a real dist dir
  mkdirSync(join(dir, 'sandbox-api'));
  writeFileSync(join(dir, DAEMON_ENTRY), DAEMON);
  return dir;
}

export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  pid?: number;
}

/** One HTTP request over the sandbox's unix socket. */
export function callSocket(
  socketPath: string,
  method: string,
  path: string,
  json?: unknown,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const data = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: data ? { 'content-type': 'application/json', 'content-length': data.length } : {},
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }),
        );
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

export async function sandboxExec(socketPath: string, cmd: string, detached = false): Promise<ExecResult> {
  const r = await callSocket(socketPath, 'POST', '/exec', { cmd, detached });
  if (r.status !== 200) throw new Error(`exec failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as ExecResult;
}
