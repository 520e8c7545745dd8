// MCP session affinity through the gateway, with the official MCP SDK client against a stateful MCP server running
// three replicas: every request of a session reaches the replica that opened it (the others would answer "Session
// not found"), and once that replica is gone (its app died, or a redeploy replaced it) the gateway answers 404 so
// the client initialises again.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berth } from '../berth-cli.js';

const REPO = join(import.meta.dirname, '../../../..');
const REPLICAS = 3;
/** Clients opened while waiting for the sessions to spread over the three replicas. */
const MAX_CLIENTS = 15;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('MCP sessions over three replicas', () => {
  let s: SandboxServer;
  let work: string;
  const clients: Client[] = [];
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-mcp-sessions-'));
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  const endpoint = () => new URL(`${s.url}/run/default/functions/mcp-stateful/mcp`);
  async function connect(): Promise<Client> {
    const c = new Client({ name: 'test', version: '1.0.0' });
    c.onerror = () => {}; // the server-sent event stream of a removed replica ends; that is expected here
    await c.connect(
      new StreamableHTTPClientTransport(endpoint(), {
        requestInit: { headers: { authorization: `Bearer ${s.adminKey}` } },
      }),
    );
    clients.push(c);
    return c;
  }
  const whoami = async (c: Client) =>
    (await c.callTool({ name: 'whoami', arguments: {} })).structuredContent as {
      replica: string;
      calls: number;
    };

  it('each session stays on its replica, and a session whose replica is gone answers 404', async () => {
    const dir = join(work, 'mcp-stateful');
    cpSync(join(REPO, 'templates/mcp-typescript'), dir, { recursive: true });
    cpSync(join(import.meta.dirname, 'fixtures/mcp-stateful/server.mjs'), join(dir, 'server.mjs'));
    writeFileSync(
      join(dir, 'berth.toml'),
      `type = "function"\nname = "mcp-stateful"\n[entrypoint]\nprod = "node server.mjs"\n[runtime]\nmemory = 256\nminScale = ${REPLICAS}\n`,
    );
    seedNodeCache(s.dataDir, 'default', dir, REPO);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);

    // Each open client holds its server-sent event stream, so the least busy replica takes the next session:
    // once the autoscaler has started minScale replicas, new sessions land on each of them.
    const home = new Map<Client, string>();
    for (let i = 0; i < MAX_CLIENTS && new Set(home.values()).size < REPLICAS; i++) {
      const c = await connect();
      home.set(c, (await whoami(c)).replica);
      await sleep(500);
    }
    assert.equal(new Set(home.values()).size, REPLICAS, 'sessions spread over the three replicas');

    for (let round = 2; round <= 6; round++)
      for (const [c, replica] of home) assert.deepEqual(await whoami(c), { replica, calls: round });

    // The app of one replica dies: its sessions are told so (404) on their next request, the others go on.
    const doomed = [...home.values()][0];
    const [crasher] = [...home].find(([, rep]) => rep === doomed) ?? [];
    assert.ok(crasher);
    await crasher.callTool({ name: 'crash', arguments: {} });
    await sleep(500);
    for (const [c, replica] of home) {
      if (replica !== doomed) {
        assert.deepEqual(await whoami(c), { replica, calls: 7 });
        continue;
      }
      await assert.rejects(whoami(c), (e: Error) => {
        assert.match(e.message, /404/);
        assert.match(e.message, /the replica that held it is gone; start a new session/);
        return true;
      });
      home.delete(c);
    }

    // A new deploy (another env) replaces every replica: the old sessions are gone with them.
    const cur = await (await s.api('/functions/mcp-stateful')).json();
    const spec = { ...cur.spec, runtime: { ...cur.spec.runtime, envs: [{ name: 'REDEPLOY', value: '1' }] } };
    const put = await s.api('/functions/mcp-stateful', {
      method: 'PUT',
      json: { metadata: { name: 'mcp-stateful' }, spec },
    });
    const since = (await put.json()).events.at(-1).time;
    for (let i = 0; ; i++) {
      const o = await (await s.api('/functions/mcp-stateful')).json();
      if (o.status === 'DEPLOYED' && o.events.at(-1).time >= since) break;
      assert.ok(i < 600, `never redeployed: ${JSON.stringify(o.events.at(-1))}`);
      await sleep(50);
    }
    const [old] = home.keys();
    await assert.rejects(whoami(old), (e: Error) => {
      assert.match(e.message, /404/);
      assert.match(e.message, /the replica that held it is gone; start a new session/);
      return true;
    });
    const fresh = await connect();
    const me = await whoami(fresh);
    assert.equal(me.calls, 1);
    assert.ok(![...home.values()].includes(me.replica), 'a replica of the new deploy');
  });
});
