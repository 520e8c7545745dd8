// Which writes to a sandbox queue its reconcile (decision 079), through the manager as the server runs it: the real
// sandbox reconciler over a real SQLite store, the sanctioned fake runtime, a real /health server on a unix socket.
// One reconcile at a time, so a sandbox created after a write is reconciled after anything that write queued.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { SecretBox } from '../../crypto/secret-box.js';
import { sandbox as sandboxKind } from '../../kinds/sandbox.js';
import type { SandboxInfo, SandboxSpec } from '../../runtime/driver.js';
import { FakeDriver } from '../../runtime/fake.js';
import { ImageStore } from '../../runtime/images/image-store.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { startControllers } from '../core/index.js';
import { sandboxReconciler } from './sandbox.js';

const CTX = { workspace: 'default', parents: [], actor: 'tester' };

class SocketDriver extends FakeDriver {
  constructor(private readonly socket: string) {
    super();
  }
  override socketPath(): string {
    return this.socket;
  }
  /** Runs inside ensure, before it returns (a slow start). */
  during?: () => Promise<void>;
  override async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    await this.during?.();
    return super.ensure(id, spec);
  }
}

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-sbx-changes-'));
  const socket = join(dir, 'health.sock');
  const health: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ status: 'ok', activeKeepAlive: 0 }));
  });
  await new Promise<void>((r) => health.listen(socket, r));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [sandboxKind], new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
  const logger = pino({ level: 'silent' });
  const driver = new SocketDriver(socket);
  const instances = new Instances({ driver });
  const images = new ImageStore({ dataDir: dir });
  /** Reconciles run, by sandbox name. */
  const runs = new Map<string, number>();
  const controllers = startControllers({
    resources,
    logger,
    queue: { concurrency: 1 },
    reconcilers: {
      Sandbox: (d) => {
        const r = sandboxReconciler({ ...d, instances, images, logger });
        return {
          ...r,
          reconcile(key, signal) {
            runs.set(key.name, (runs.get(key.name) ?? 0) + 1);
            return r.reconcile(key, signal);
          },
        };
      },
    },
  });
  const key = (name: string) => ({ kind: 'Sandbox', workspace: 'default', parent: '', name });
  const get = async (name: string): Promise<any> => (await store.get(key(name)))?.body;
  async function until(cond: () => Promise<boolean>, what: string) {
    for (let i = 0; i < 2000; i++) {
      if (await cond()) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.fail(`not reached: ${what}`);
  }
  let markers = 0;
  return {
    resources,
    driver,
    key,
    get,
    until,
    runs: (name: string) => runs.get(name) ?? 0,
    async create(name: string, spec: object = {}) {
      await resources.create(sandboxKind, CTX, { metadata: { name }, spec });
      await until(async () => (await get(name))?.status === 'DEPLOYED', `${name} DEPLOYED`);
    },
    /**
     * Returns once everything queued before now has been reconciled: a sandbox created now is reconciled after it.
     * Two in turn: a reconcile under way when the first is created queues its re-run after the first, never after the
     * second.
     */
    async settle() {
      for (let i = 0; i < 2; i++) {
        const name = `marker-${markers++}`;
        await resources.create(sandboxKind, CTX, { metadata: { name }, spec: {} });
        await until(async () => (await get(name))?.status === 'DEPLOYED', name);
      }
    },
    async close() {
      await controllers.stop();
      await store.close();
      await new Promise((r) => health.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test("the gateway's write of a sandbox's run state and lastUsedAt queues no reconcile", async () => {
  const env = await setup();
  try {
    await env.create('box');
    await env.settle();
    const before = env.runs('box');
    // As gateway/usage-writer.ts writes them: a sandbox frozen, then used again.
    await env.resources.updateStatus(env.key('box'), { extras: { state: 'STANDBY' } });
    await env.resources.updateStatus(env.key('box'), {
      extras: { state: 'RUNNING', lastUsedAt: new Date(Date.now() + 1000).toISOString() },
    });
    await env.settle();
    assert.equal((await env.get('box')).state, 'RUNNING', 'the writes landed');
    assert.equal(env.runs('box'), before);
  } finally {
    await env.close();
  }
});

test('the DEPLOYED status a reconcile writes does not queue the same sandbox again', async () => {
  const env = await setup();
  try {
    await env.create('box');
    await env.settle();
    assert.equal(env.runs('box'), 1);
  } finally {
    await env.close();
  }
});

test('a spec change queues a reconcile, which acts on it', async () => {
  const env = await setup();
  try {
    await env.create('box');
    await env.settle();
    const before = env.runs('box');
    await env.resources.replace(sandboxKind, CTX, 'box', {
      metadata: { name: 'box' },
      spec: { enabled: false },
    });
    await env.until(async () => (await env.get('box')).status === 'DEACTIVATED', 'DEACTIVATED');
    assert.ok(env.runs('box') > before);
  } finally {
    await env.close();
  }
});

test('a DELETE queues a reconcile, which ends the sandbox', async () => {
  const env = await setup();
  try {
    await env.create('box');
    await env.settle();
    await env.resources.delete(sandboxKind, CTX, 'box');
    // Deleted before its time: TERMINATED, then its record goes at once.
    await env.until(async () => (await env.get('box')) === undefined, 'the record removed');
  } finally {
    await env.close();
  }
});

test('a status change the reconcile acts on queues it (a restore moves a DEPLOYED sandbox to DEPLOYING)', async () => {
  const env = await setup();
  try {
    await env.create('box');
    await env.settle();
    const before = env.runs('box');
    // As a snapshot restore writes it (controllers/sandbox/snapshots.ts), with no spec or metadata change.
    await env.resources.updateStatus(env.key('box'), {
      to: 'DEPLOYING',
      message: 'restoring',
      extras: { state: undefined },
    });
    await env.until(async () => (await env.get('box')).status === 'DEPLOYED', 'DEPLOYED again');
    assert.ok(env.runs('box') > before);
  } finally {
    await env.close();
  }
});

test('a DELETE written while the reconcile runs (a slow start) queues it again, and the sandbox ends', async () => {
  const env = await setup();
  try {
    let started!: () => void;
    const inStart = new Promise<void>((r) => {
      started = r;
    });
    let release!: () => void;
    env.driver.during = () => {
      started();
      return new Promise<void>((r) => {
        release = r;
      });
    };
    await env.resources.create(sandboxKind, CTX, { metadata: { name: 'slow' }, spec: {} });
    await inStart;
    env.driver.during = undefined;
    await env.resources.delete(sandboxKind, CTX, 'slow');
    release();
    await env.until(async () => (await env.get('slow')) === undefined, 'the record removed');
    assert.ok(env.runs('slow') >= 2, 'the start, then the deletion');
  } finally {
    await env.close();
  }
});
