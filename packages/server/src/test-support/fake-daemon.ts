// The fake runtime (runtime/fake.ts) with a stand-in sandbox API daemon per instance, for the unit tests of what
// starts instances (the replica set, the deploy reconciler, the job runner, the workload gateway): each instance
// answers on its own unix socket from the moment it exists, as a real one does, with a real HTTP server speaking the
// daemon's wire format (sandbox-api/schema.ts) for what the server asks of it (sandbox-api/client.ts): /health, a
// process started (its outcome chosen by the test), its state, its stop. A killed or removed instance stops answering.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxInfo, SandboxSpec } from '../runtime/driver.js';
import { FakeDriver } from '../runtime/fake.js';
import type { ProcessJson, ProcessRequest } from '../sandbox-api/schema.js';

/** What a started process did, as the test decides: runs on (`running`), or ended with a code and output. */
export interface Outcome {
  status: ProcessJson['status'];
  exitCode?: number;
  logs?: string;
}

export interface DaemonDriverOptions {
  /** The outcome of each process started in an instance (default: it runs). May wait (a task that takes time). */
  onProcess?: (id: string, req: ProcessRequest, spec: SandboxSpec) => Outcome | Promise<Outcome>;
  /** The private address of an instance (default the fake's): a loopback address lets a test serve its ports. */
  address?: (id: string) => string;
  now?: () => Date;
}

export class DaemonDriver extends FakeDriver {
  readonly dir: string;
  private readonly servers = new Map<string, Server>();
  /** Every process request each instance got, in order. */
  readonly started = new Map<string, ProcessRequest[]>();
  /** The processes each instance runs or ran, by name. */
  private readonly processes = new Map<string, Map<string, ProcessJson>>();

  constructor(private readonly daemonOpts: DaemonDriverOptions = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'berth-fake-daemon-'));
    super(daemonOpts.now, { socketDir: dir, address: daemonOpts.address });
    this.dir = dir;
  }

  override async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    const info = await super.ensure(id, spec);
    if (!this.servers.has(id)) await this.serve(id, info.socketPath, spec);
    return info;
  }

  override async remove(id: string): Promise<void> {
    this.stop(id);
    await super.remove(id);
  }

  override kill(id: string): void {
    this.stop(id);
    super.kill(id);
  }

  /** Stops every stand-in daemon and removes the sockets' directory. */
  async close(): Promise<void> {
    for (const id of [...this.servers.keys()]) this.stop(id);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private stop(id: string) {
    this.servers.get(id)?.close();
    this.servers.get(id)?.closeAllConnections();
    this.servers.delete(id);
  }

  private serve(id: string, socketPath: string, spec: SandboxSpec): Promise<void> {
    const procs = new Map<string, ProcessJson>();
    this.processes.set(id, procs);
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', async () => {
        const json = (status: number, v: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(v));
        };
        const url = req.url ?? '/';
        if (url === '/health') return json(200, { status: 'ok', activeKeepAlive: 0, runningProcesses: 0 });
        const name = decodeURIComponent(/^\/process\/([^/]+)/.exec(url)?.[1] ?? '');
        if (url === '/process' && req.method === 'POST') {
          const p: ProcessRequest = JSON.parse(body);
          this.started.set(id, [...(this.started.get(id) ?? []), p]);
          const out = await (this.daemonOpts.onProcess?.(id, p, spec) ?? { status: 'running' });
          const proc = processJson(p, out);
          procs.set(proc.name, proc);
          return json(200, proc);
        }
        const proc = procs.get(name);
        if (!proc) return json(404, { error: `process ${name} not found` });
        if (req.method === 'DELETE') {
          procs.set(name, { ...proc, status: 'stopped' });
          return json(200, { message: 'stopped' });
        }
        if (url.endsWith('/logs')) return json(200, { logs: proc.logs, stdout: proc.logs, stderr: '' });
        return json(200, proc);
      });
    });
    this.servers.set(id, server);
    return new Promise((r) => server.listen(socketPath, () => r()));
  }
}

function processJson(p: ProcessRequest, out: Outcome): ProcessJson {
  return {
    pid: '1',
    name: p.name ?? 'process',
    command: p.command,
    status: out.status,
    exitCode: out.exitCode ?? 0,
    startedAt: new Date().toUTCString(),
    completedAt: out.status === 'running' ? '' : new Date().toUTCString(),
    workingDir: p.workingDir ?? '/',
    logs: out.logs ?? '',
    stdout: out.logs ?? '',
    stderr: '',
    restartCount: 0,
    restartOnFailure: false,
    maxRestarts: 0,
    keepAlive: p.keepAlive === true,
    stdin: false,
  };
}
