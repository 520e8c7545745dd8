// `berth serve` for the chaos and soak runs: a child process on its own data dir, killed with SIGKILL and started
// again on demand; every request goes to whichever incarnation runs now, and fails (to be retried) while none does.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, stopped } from '../serve-process.js';

export interface Answer {
  status: number;
  body: any;
  text: string;
}

export class ChaosServer {
  readonly dataDir = mkdtempSync(join(tmpdir(), 'berth-chaos-'));
  key = '';
  private current?: { child: ChildProcess; url: string };
  /** Resolves once a restart is over; requests made meanwhile wait for it. */
  private restarting?: Promise<void>;
  kills = 0;

  constructor(private readonly env: Record<string, string>) {}

  async start(): Promise<void> {
    this.current = await serve(this.dataDir, this.env);
    this.key ||= readFileSync(join(this.dataDir, 'admin.key'), 'utf8').trim();
  }

  get url(): string {
    if (!this.current) throw new Error('the server is not running');
    return this.current.url;
  }

  /** The URL of the incarnation running now, once a restart under way is over. */
  async ready(): Promise<string> {
    await this.restarting;
    return this.url;
  }

  get pid(): number | undefined {
    return this.current?.child.pid;
  }

  /** SIGKILL, then started again at once on the same data dir; `down` runs once the old process is gone. */
  async kill(down?: () => void): Promise<void> {
    const c = this.current;
    if (!c || this.restarting) return;
    this.restarting = (async () => {
      c.child.kill('SIGKILL');
      await stopped(c.child);
      this.kills++;
      down?.();
      this.current = undefined;
      this.current = await serve(this.dataDir, this.env);
    })().finally(() => {
      this.restarting = undefined;
    });
    await this.restarting;
  }

  async stop(): Promise<void> {
    await this.restarting;
    const c = this.current;
    if (!c) return;
    c.child.kill('SIGTERM');
    await stopped(c.child);
    this.current = undefined;
  }

  /** One request with the admin key; a connection failure (the server is down) is status 0. */
  async call(
    method: string,
    path: string,
    json?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    await this.restarting;
    try {
      const res = await fetch(`${this.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          ...(json !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: json !== undefined ? JSON.stringify(json) : undefined,
        signal: AbortSignal.timeout(60_000),
      });
      const text = await res.text();
      let body: any = text;
      try {
        body = JSON.parse(text);
      } catch {}
      return { status: res.status, body, text };
    } catch (err) {
      return { status: 0, body: undefined, text: (err as Error).message };
    }
  }

  /** The call retried until it answers (any status) or `ms` pass: for set-up and checks, not for the load. */
  async settled(method: string, path: string, json?: unknown, ms = 60_000): Promise<Answer> {
    const until = Date.now() + ms;
    for (;;) {
      const a = await this.call(method, path, json);
      if (a.status !== 0 && a.status !== 503) return a;
      if (Date.now() > until) return a;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
