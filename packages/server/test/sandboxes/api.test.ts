// Sandboxes end to end over HTTP: a real server, real sandboxes (as root), the gateway at /run/... and by Host.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { exec, getWithHost, type SandboxServer, startSandboxServer } from './support.js';

/** Host pids whose command line holds `marker` (processes inside sandboxes are host processes too). */
function pidsRunning(marker: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(marker))
        out.push(Number(e));
    } catch {}
  }
  return out;
}

describe('sandboxes through the API and the gateway', () => {
  let s: SandboxServer;
  before(async () => {
    s = await startSandboxServer();
  });
  after(() => s.close());

  it('answers POST /v0/sandboxes once the sandbox runs: DEPLOYED, state RUNNING, with its address', async () => {
    const sb = await s.create('api-one');
    assert.equal(sb.status, 'DEPLOYED');
    assert.equal(sb.state, 'RUNNING');
    assert.equal(sb.metadata.url, `${s.url}/run/default/sandboxes/api-one`);
    assert.ok(!Number.isNaN(Date.parse(sb.lastUsedAt)));
    assert.deepEqual(
      sb.events.map((e: any) => e.status),
      ['DEPLOYING', 'DEPLOYED'],
    );
    const health = await s.run(`${sb.metadata.url}/health`);
    assert.equal(health.status, 200);
    assert.equal((await health.json()).status, 'ok');
  });

  it("passes the spec's envs, secret ones included, to every process, in cold and pre-started sandboxes", async () => {
    const envs = [
      { name: 'GREETING', value: 'hello' },
      { name: 'TOKEN', value: 's3cret', secret: true },
    ];
    // The first create opens the runtime, which then fills its warm pool; the later ones are assignments.
    for (const name of ['api-env-a', 'api-env-b', 'api-env-c']) {
      const { metadata } = await s.create(name, { runtime: { envs } });
      const r = await exec(s, metadata.url, 'printf %s-%s "$GREETING" "$TOKEN"');
      assert.equal(r.stdout, 'hello-s3cret', name);
      await new Promise((resolve) => setTimeout(resolve, 1500));
    }
  });

  it('runs user code with the conventional umask 022, not the 077 of the server', async () => {
    const { metadata } = await s.create('api-umask');
    const r = await exec(s, metadata.url, 'umask; touch /tmp/f && stat -c %a /tmp/f');
    assert.equal(r.stdout, '0022\n644\n');
  });

  it('restarts a sandbox whose envs change, answering the PUT once it runs: new envs, old processes gone', async () => {
    const sb = await s.create('api-env-new', { runtime: { envs: [{ name: 'MODE', value: 'one' }] } });
    const before = await exec(s, sb.metadata.url, 'printf %s "$MODE"');
    assert.equal(before.stdout, 'one');
    const keeper = await s.run(`${sb.metadata.url}/process`, {
      method: 'POST',
      json: { command: 'sleep 300', name: 'keeper' },
    });
    assert.equal(keeper.status, 200);
    const got = await (await s.api('/sandboxes/api-env-new')).json();
    got.spec.runtime.envs = [
      { name: 'MODE', value: 'two' },
      { name: 'TOKEN', value: 'live-secret', secret: true },
    ];
    const put = await s.api('/sandboxes/api-env-new', { method: 'PUT', json: got });
    const answer = await put.json();
    assert.equal(put.status, 200, JSON.stringify(answer));
    assert.equal(answer.status, 'DEPLOYED');
    const after = await exec(s, sb.metadata.url, 'printf %s-%s "$MODE" "$TOKEN"');
    assert.equal(after.stdout, 'two-live-secret');
    assert.equal((await s.run(`${sb.metadata.url}/process/keeper`)).status, 404);
  });

  it('runs a command synchronously and streamed, with its output and exit code', async () => {
    const { metadata } = await s.create('api-exec');
    const sync = await exec(s, metadata.url, 'echo hello; echo oops >&2; exit 3');
    assert.equal(sync.status, 'failed');
    assert.equal(sync.exitCode, 3);
    assert.equal(sync.stdout, 'hello\n');
    assert.equal(sync.stderr, 'oops\n');

    const res = await s.run(`${metadata.url}/process`, {
      method: 'POST',
      headers: { accept: 'text/event-stream' },
      json: { command: 'echo first; sleep 1; echo second', waitForCompletion: true },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines: any[] = [];
    let buffer = '';
    let firstSeenBeforeEnd = false;
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        lines.push(JSON.parse(buffer.slice(0, nl)));
        buffer = buffer.slice(nl + 1);
      }
      const out = lines
        .filter((l) => l.type === 'stdout')
        .map((l) => l.data)
        .join('');
      if (out.includes('first') && !lines.some((l) => l.type === 'result')) firstSeenBeforeEnd = true;
    }
    assert.ok(firstSeenBeforeEnd, 'the first line reached the client before the command ended');
    assert.equal(
      lines
        .filter((l) => l.type === 'stdout')
        .map((l) => l.data)
        .join(''),
      'first\nsecond\n',
    );
    const result = JSON.parse(lines.at(-1).data);
    assert.equal(lines.at(-1).type, 'result');
    assert.equal(result.exitCode, 0);
  });

  it('writes, reads, lists and removes files', async () => {
    const { metadata } = await s.create('api-fs');
    const file = `${metadata.url}/filesystem/${encodeURIComponent('/tmp/dir/a.txt')}`;
    const put = await s.run(file, { method: 'PUT', json: { content: 'hello sandbox' } });
    assert.equal(put.status, 200, await put.clone().text());
    const read = await (await s.run(file)).json();
    assert.equal(read.content, 'hello sandbox');
    const raw = await s.run(file, { headers: { accept: 'application/octet-stream' } });
    assert.equal(await raw.text(), 'hello sandbox');
    const dir = await (await s.run(`${metadata.url}/filesystem/${encodeURIComponent('/tmp/dir')}`)).json();
    assert.deepEqual(
      dir.files.map((f: any) => f.name),
      ['a.txt'],
    );
    assert.equal((await s.run(file, { method: 'DELETE' })).status, 200);
    const gone = await s.run(file);
    assert.equal(gone.status, 404);
    assert.equal(typeof (await gone.json()).error, 'string', "the daemon's own error body passes through");
  });

  it('keeps the logs of a named process', async () => {
    const { metadata } = await s.create('api-logs');
    await exec(s, metadata.url, 'echo hi; echo there >&2', { name: 'greeter' });
    const logs = await (await s.run(`${metadata.url}/process/greeter/logs`)).json();
    assert.equal(logs.stdout, 'hi\n');
    assert.equal(logs.stderr, 'there\n');
    const missing = await s.run(`${metadata.url}/process/nobody/logs`);
    assert.equal(missing.status, 404);
  });

  it('applies a ttl and labels to the running sandbox, and refuses a memory change naming the field', async () => {
    const sb = await s.create('api-put');
    await exec(s, sb.metadata.url, 'echo kept > /tmp/marker');
    const put = await s.api('/sandboxes/api-put', {
      method: 'PUT',
      json: {
        metadata: { name: 'api-put', labels: { team: 'a' } },
        spec: { ...sb.spec, runtime: { ...sb.spec.runtime, ttl: '1h' } },
      },
    });
    assert.equal(put.status, 200, await put.clone().text());
    const updated = await s.waitFor(
      'api-put',
      (b) => b.status === 'DEPLOYED' && b.spec.runtime.ttl === '1h',
      'DEPLOYED with the ttl',
    );
    assert.equal(updated.metadata.labels.team, 'a');
    assert.ok(updated.expiresIn > 3500 && updated.expiresIn <= 3600);
    const marker = await exec(s, sb.metadata.url, 'cat /tmp/marker');
    assert.equal(marker.stdout, 'kept\n', 'the same sandbox kept running');

    const bigger = await s.api('/sandboxes/api-put', {
      method: 'PUT',
      json: {
        metadata: { name: 'api-put' },
        spec: { ...sb.spec, runtime: { ...sb.spec.runtime, memory: 512 } },
      },
    });
    assert.equal(bigger.status, 422);
    const problem = await bigger.json();
    assert.deepEqual(
      problem.errors.map((e: any) => e.pointer),
      ['/spec/runtime/memory'],
    );
  });

  it('stops a sandbox on enabled: false and starts a fresh one on enabled: true', async () => {
    const sb = await s.create('api-toggle');
    await exec(s, sb.metadata.url, 'echo old > /tmp/marker');
    const off = await s.api('/sandboxes/api-toggle', {
      method: 'PUT',
      json: { ...sb, spec: { ...sb.spec, enabled: false } },
    });
    assert.equal(off.status, 200, await off.clone().text());
    const deactivated = await s.waitFor('api-toggle', (b) => b.status === 'DEACTIVATED', 'DEACTIVATED');
    assert.equal(deactivated.state, undefined);
    const down = await s.run(`${sb.metadata.url}/health`);
    assert.equal(down.status, 503);
    assert.match((await down.json()).detail, /deactivated/);
    const on = await s.api('/sandboxes/api-toggle', {
      method: 'PUT',
      json: { ...deactivated, spec: { ...sb.spec, enabled: true } },
    });
    assert.equal(on.status, 200, await on.clone().text());
    const back = await s.waitFor('api-toggle', (b) => b.status === 'DEPLOYED', 'DEPLOYED again');
    assert.equal(back.state, 'RUNNING');
    const marker = await exec(s, sb.metadata.url, 'cat /tmp/marker');
    assert.equal(marker.exitCode, 1, 'a fresh sandbox: the old files are gone');
  });

  it('answers the existing sandbox with createIfNotExist, and 409 to a plain second create', async () => {
    const first = await s.create('api-twice');
    const again = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'api-twice' }, spec: {} },
    });
    assert.equal(again.status, 409);
    const problem = await again.json();
    assert.equal(problem.code, 409);
    assert.equal(problem.error, 'SANDBOX_ALREADY_EXISTS');
    const existing = await s.api('/sandboxes?createIfNotExist=true', {
      method: 'POST',
      json: { metadata: { name: 'api-twice' }, spec: {} },
    });
    assert.equal(existing.status, 200);
    const body = await existing.json();
    assert.equal(body.status, 'DEPLOYED');
    assert.equal(body.metadata.createdAt, first.metadata.createdAt);
  });

  it('deletes a sandbox: every process stops before the DELETE answers, then it and its address answer 404', async () => {
    const { metadata } = await s.create('api-delete');
    const marker = 'sleep 987654';
    const started = await s.run(`${metadata.url}/process`, { method: 'POST', json: { command: marker } });
    assert.equal(started.status, 200);
    assert.equal(pidsRunning(marker).length, 1);
    const del = await s.api('/sandboxes/api-delete', { method: 'DELETE' });
    assert.equal(del.status, 200);
    const done = await del.json();
    assert.equal(done.status, 'TERMINATED');
    assert.equal(done.state, undefined);
    assert.deepEqual(pidsRunning(marker), []);
    assert.equal((await s.api('/sandboxes/api-delete')).status, 404, 'the record went with it');
    const after = await s.run(`${metadata.url}/health`);
    assert.equal(after.status, 404);
    assert.match(after.headers.get('content-type') ?? '', /application\/problem\+json/);
  });

  it('asks for a credential (401) and hides sandboxes of another workspace (404)', async () => {
    const { metadata } = await s.create('api-auth');
    const anonymous = await fetch(`${metadata.url}/health`);
    assert.equal(anonymous.status, 401);
    assert.match(anonymous.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.equal((await anonymous.json()).code, 401);
    const bad = await fetch(`${metadata.url}/health`, {
      headers: { 'x-blaxel-authorization': 'Bearer not-a-key' },
    });
    assert.equal(bad.status, 401);

    // A service account of another workspace, with its own key.
    assert.equal((await s.api('/workspaces', { method: 'POST', json: { name: 'elsewhere' } })).status, 200);
    const ws = { 'x-service-workspace': 'elsewhere' };
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'outsider' }, headers: ws })
    ).json();
    const key = await (
      await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {}, headers: ws })
    ).json();
    const outsider = await fetch(`${metadata.url}/health`, {
      headers: { authorization: `Bearer ${key.apiKey}` },
    });
    assert.equal(outsider.status, 404);
    const problem = await outsider.json();
    assert.equal(problem.type, 'https://berth.dev/problems/not-found');
    assert.match(problem.error, /not found/, 'the message, where the SDK builds its error from');
    const unknown = await s.run(`${s.url}/run/default/sandboxes/no-such-box/health`);
    assert.equal(unknown.status, 404);
  });
});

describe('sandboxes addressed by Host', () => {
  let s: SandboxServer;
  before(async () => {
    s = await startSandboxServer({ BERTH_INFERENCE_HOST: 'sbx.test' });
  });
  after(() => s.close());

  it('serves sbx-<name>-<workspace>.<region>.<inference_host> and shows it as metadata.url', async () => {
    const sb = await s.create('my-box');
    const host = 'sbx-my-box-default.local.sbx.test';
    assert.equal(sb.metadata.url, `http://${host}:${s.port}`);
    const auth = { 'x-blaxel-authorization': `Bearer ${s.adminKey}` };
    const res = await getWithHost(`${s.url}/health`, `${host}:${s.port}`, auth);
    assert.equal(res.status, 200, res.body);
    assert.equal(JSON.parse(res.body).status, 'ok');
    // Any path belongs to the sandbox on its own host, even one the API also serves.
    const v0 = await getWithHost(`${s.url}/v0/sandboxes`, host, auth);
    assert.equal(v0.status, 404);
    assert.equal(typeof JSON.parse(v0.body).error, 'string');
    assert.equal((await getWithHost(`${s.url}/health`, host, {})).status, 401);
    assert.equal(
      (await getWithHost(`${s.url}/health`, 'sbx-nothing-default.local.sbx.test', auth)).status,
      404,
    );
    // The path form keeps working beside it.
    assert.equal((await s.run(`${s.url}/run/default/sandboxes/my-box/health`)).status, 200);
  });
});
