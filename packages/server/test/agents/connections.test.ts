// Integration connections on a real replica: an agent naming a connection sees its config and decrypted secret
// as BL_CONNECTION_<CONNECTION>_<KEY>, while the API's answers, the events and the server's log never carry the
// secret.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { berth } from '../berth-cli.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');
const SECRET = 'sk-conn-7d1f0c9e2b';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('integration connections in a replica', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-conn-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the replica reads the connection as env; responses, events and logs do not show the secret', async () => {
    const c = await s.api('/integrations/connections/git-hub', {
      method: 'PUT',
      json: {
        metadata: { name: 'git-hub' },
        spec: {
          integration: 'http-api',
          config: { baseUrl: 'https://api.example.test' },
          secret: { apiKey: SECRET },
        },
      },
    });
    assert.equal(c.status, 200, await c.text());
    // The template answers the environment variable named by its input instead of the input in capitals.
    const dir = join(work, 'env-agent');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    const main = readFileSync(join(dir, 'main.py'), 'utf8');
    const patched = main.replace(
      '"output": inputs if REPLY_STYLE == "echo" else inputs.upper(),',
      '"output": os.environ.get(inputs, ""),',
    );
    assert.notEqual(patched, main, 'the template still has the line this test replaces');
    writeFileSync(join(dir, 'main.py'), patched);
    writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "env-agent"\n[runtime]\nmemory = 256\n');
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.stdout + r.stderr);

    const cur = await (await s.api('/agents/env-agent')).json();
    const put = await s.api('/agents/env-agent', {
      method: 'PUT',
      json: { metadata: { name: 'env-agent' }, spec: { ...cur.spec, integrationConnections: ['git-hub'] } },
    });
    const answer = await put.text();
    assert.equal(put.status, 200, answer);
    assert.doesNotMatch(answer, new RegExp(SECRET));
    let o: any;
    for (let i = 0; i < 600; i++) {
      o = await (await s.api('/agents/env-agent')).json();
      if (o.status === 'DEPLOYED' && o.events.at(-1).message.startsWith('deployed')) break;
      if (o.status === 'FAILED') assert.fail(o.events.at(-1).message);
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED');

    const ask = async (name: string) => {
      const res = await s.run(`${s.url}/run/default/agents/env-agent`, {
        method: 'POST',
        json: { inputs: name },
      });
      assert.equal(res.status, 200);
      return (await res.json()).output;
    };
    assert.equal(await ask('BL_CONNECTION_GIT_HUB_API_KEY'), SECRET);
    assert.equal(await ask('BL_CONNECTION_GIT_HUB_BASE_URL'), 'https://api.example.test');

    const views = [
      await (await s.api('/agents/env-agent')).text(),
      await (await s.api('/agents')).text(),
      await (await s.api('/integrations/connections/git-hub')).text(),
    ];
    for (const v of views) assert.doesNotMatch(v, new RegExp(SECRET));
    assert.doesNotMatch(s.logs(), new RegExp(SECRET), 'the server log never holds the secret');
  });
});
