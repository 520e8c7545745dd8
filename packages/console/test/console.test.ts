// The web console in a real browser (Debian's chromium driven by playwright-core) against a real server with real
// sandboxes, builds, jobs and a fake model provider: one server, one browser, the flows of issue 26. Every page the
// test visits is saved as a screenshot under .test-results/console/.
import assert from 'node:assert/strict';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import yazl from 'yazl';
import { launchBrowser, type TestBrowser } from '../../server/src/test-support/browser.js';
import { seedNodeCache } from '../../server/src/test-support/dependency-cache.js';
import { type FakeProvider, startFakeProvider } from '../../server/src/test-support/fake-provider.js';
import { OUTBOUND_LOOPBACK } from '../../server/src/test-support/server.js';
import { berth } from '../../server/test/berth-cli.js';
import { deployJob } from '../../server/test/jobs/support.js';
import { type SandboxServer, startSandboxServer } from '../../server/test/sandboxes/support.js';

const REPO = join(import.meta.dirname, '../../..');
const SHOTS = join(REPO, '.test-results/console');
/** Bound of each wait on the page: builds and sandboxes are real. */
const WAIT_MS = 90_000;
const SANDBOX = 'web-box';
const AGENT = 'console-agent';
const FUNCTION = 'mcp-typescript';
const JOB = 'console-job';
const MODEL = 'console-model';

function filesOf(dir: string): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p);
    }
  };
  walk(dir);
  return out;
}

async function zipOf(files: Record<string, Buffer>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, data] of Object.entries(files)) z.addBuffer(data, name, { mtime: new Date(0) });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The Python agent template answering `version` in every reply. */
function agentZip(version: string) {
  const files = filesOf(join(REPO, 'templates/agent-python'));
  files['main.py'] = Buffer.from(
    files['main.py']
      .toString('utf8')
      .replace(
        '"turn": len(history) + 1,',
        `"turn": len(history) + 1, "version": ${JSON.stringify(version)},`,
      ),
  );
  return zipOf(files);
}

describe('the web console in a real browser', { timeout: 600_000 }, () => {
  let s: SandboxServer;
  let fake: FakeProvider;
  let b: TestBrowser;
  let page: Page;
  let work: string;
  /** Content Security Policy violations the pages reported: there must be none. */
  const violations: string[] = [];
  /** Builds started at once in before(), awaited by the tests that need them. */
  let mcpDeployed: Promise<void>;
  let jobDeployed: Promise<void>;

  const ok = async (res: Response) => {
    const text = await res.text();
    assert.ok(res.ok, `${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const go = (path: string) => page.goto(`${s.url}/console${path}`);
  const waitFor = async (what: string, pred: () => Promise<boolean>) => {
    const until = Date.now() + WAIT_MS;
    while (!(await pred())) {
      if (Date.now() > until) assert.fail(`never: ${what}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  before(async () => {
    rmSync(SHOTS, { recursive: true, force: true });
    mkdirSync(SHOTS, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'berth-console-'));
    fake = await startFakeProvider();
    // Standby after 2 s idle, so the test sees a sandbox sleep and wake; the fake provider listens on loopback.
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '2', ...OUTBOUND_LOOPBACK });
    // The builds that take longest start now, beside the browser tests that do not need them.
    const mcpDir = join(work, FUNCTION);
    cpSync(join(REPO, 'templates', FUNCTION), mcpDir, { recursive: true });
    seedNodeCache(s.dataDir, 'default', mcpDir, REPO);
    mcpDeployed = berth(s, ['deploy', mcpDir]).then((r) => assert.equal(r.code, 0, r.out));
    jobDeployed = deployJob(s, join(work, JOB), JOB, { memory: 256, maxRetries: 2, maxConcurrentTasks: 2 });
    mcpDeployed.catch(() => undefined);
    jobDeployed.catch(() => undefined);
    b = await launchBrowser();
    page = await (await b.context()).newPage();
    page.on('console', (m) => {
      if (/Content.Security.Policy/i.test(m.text())) violations.push(m.text());
    });
  });

  after(async () => {
    await b?.close();
    await s?.close();
    await fake?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('serves the console under a strict CSP with no inline script, and signs in with a key kept in the tab only', async () => {
    const res = await fetch(`${s.url}/console/`);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    const html = await res.text();
    assert.equal(/<script(?![^>]*\bsrc=)[^>]*>/.test(html), false, 'no inline script in the page');
    const asset = html.match(/\/console\/assets\/[\w.-]+\.js/)?.[0];
    assert.ok(asset);
    assert.match((await fetch(`${s.url}${asset}`)).headers.get('cache-control') ?? '', /immutable/);

    const t0 = Date.now();
    await go('/');
    await page.getByLabel('API key').fill(s.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    console.log(`console: signed in and the overview shown ${Date.now() - t0} ms after the first request`);
    const stored = await page.evaluate(() => ({
      session: sessionStorage.getItem('berth.console.session'),
      local: JSON.stringify(localStorage),
      cookie: document.cookie,
      url: location.href,
    }));
    assert.equal(JSON.parse(stored.session ?? '{}').key, s.adminKey, 'the key is in sessionStorage');
    assert.equal(stored.cookie, '', 'no cookie');
    assert.ok(!stored.local.includes(s.adminKey), 'not in localStorage');
    assert.ok(!stored.url.includes(s.adminKey), 'not in the URL');
    await shot('overview-empty');
  });

  it('creates a sandbox, types in its terminal and reads the output', async () => {
    await go('/sandboxes');
    await page.getByRole('button', { name: 'New sandbox' }).click();
    await page.getByLabel('Name', { exact: true }).fill(SANDBOX);
    await page.getByLabel('Memory (MB)').fill('256');
    await page.getByRole('button', { name: 'Create' }).click();
    await page
      .getByRole('heading', { name: SANDBOX })
      .waitFor({ timeout: WAIT_MS })
      .catch(async (err) => {
        // What the page shows (the dialog's error, if the create was refused) and what the API says of it.
        const r = await s.api(`/sandboxes/${SANDBOX}`);
        throw new Error(
          `no page for the new sandbox; the page says: ${(await page.textContent('body'))?.slice(0, 500)}; ` +
            `GET of it: ${r.status} ${(await r.text()).slice(0, 1500)}`,
          { cause: err },
        );
      });
    await page.locator('.badge', { hasText: 'DEPLOYED' }).first().waitFor({ timeout: WAIT_MS });
    await shot('sandbox');
    await page.getByRole('tab', { name: 'Terminal' }).click();
    await page.locator('.terminal-box[data-state="open"]').waitFor({ timeout: WAIT_MS });
    await page.locator('.terminal-box').click();
    await page.keyboard.type('echo "console-$((6*7))"\n');
    await page.locator('.xterm-rows', { hasText: 'console-42' }).waitFor({ timeout: WAIT_MS });
    await shot('sandbox-terminal');
  });

  it('uploads a file to the sandbox and reads it back', async () => {
    await page.getByRole('tab', { name: 'Files' }).click();
    await page.getByLabel('Path').fill('/tmp');
    await page.getByRole('button', { name: 'Go' }).click();
    const local = join(work, 'hello-console.txt');
    writeFileSync(local, 'written by the console test\n');
    await page.locator('#fs-upload').setInputFiles(local);
    await page.getByRole('button', { name: 'hello-console.txt' }).click({ timeout: WAIT_MS });
    await page
      .locator('pre[data-label="File content"]', { hasText: 'written by the console test' })
      .waitFor();
    await shot('sandbox-files');
  });

  it('shows the sandbox go to standby and wake, without a reload', async () => {
    // The overview tab makes no request to the sandbox: it goes idle and the watch reports its new state.
    await page.getByRole('tab', { name: 'Overview' }).click();
    const state = page.locator('.title-row .badge').nth(1);
    await waitFor('STANDBY shown', async () => (await state.textContent()) === 'STANDBY');
    await shot('sandbox-standby');
    await page.getByRole('tab', { name: 'Processes' }).click();
    await page
      .getByRole('table', { name: 'Processes' })
      .or(page.getByText('No processes.'))
      .waitFor({ timeout: WAIT_MS });
    await waitFor('RUNNING shown again', async () => (await state.textContent()) === 'RUNNING');
    await page.getByRole('tab', { name: 'Metrics' }).click();
    await page.getByText('Sampled every').waitFor();
    await page.waitForTimeout(7000);
    await shot('sandbox-metrics');
    await go('/sandboxes');
    await page.getByRole('link', { name: new RegExp(SANDBOX) }).waitFor();
    await shot('sandboxes');
  });

  it('follows an agent build deployed through the API, then splits traffic with the canary slider', async () => {
    await ok(
      await s.api('/agents', {
        method: 'POST',
        json: { metadata: { name: AGENT }, spec: { runtime: { memory: 256 } } },
      }),
    );
    await go(`/agents/${AGENT}/build`);
    await ok(
      await s.api(`/agents/${AGENT}/code`, {
        method: 'PUT',
        body: new Uint8Array(await agentZip('v1')),
        headers: { 'content-type': 'application/zip' },
      }),
    );
    await page
      .locator('pre[aria-label="Build log"]', { hasText: 'no requirements' })
      .waitFor({ timeout: WAIT_MS });
    await page.locator('.title-row .badge', { hasText: 'DEPLOYED' }).waitFor({ timeout: WAIT_MS });
    await shot('agent-build');
    const v1 = (await ok(await s.api(`/agents/${AGENT}`))).activeRevision;
    await ok(
      await s.api(`/agents/${AGENT}/code`, {
        method: 'PUT',
        body: new Uint8Array(await agentZip('v2')),
        headers: { 'content-type': 'application/zip' },
      }),
    );
    await waitFor('the second revision active', async () => {
      const o = await ok(await s.api(`/agents/${AGENT}`));
      return o.status === 'DEPLOYED' && o.activeRevision !== v1;
    });
    await go(`/agents/${AGENT}/revisions`);
    await page.getByLabel('Canary revision').selectOption(v1);
    await page.getByLabel('Canary share (percent)').fill('50');
    await page.getByRole('button', { name: 'Apply split' }).click();
    await page
      .getByTestId('traffic-split')
      .filter({ hasText: 'canary' })
      .filter({ hasText: ': 50%' })
      .waitFor({ timeout: WAIT_MS });
    await waitFor('the canary deployed', async () => {
      const o = await ok(await s.api(`/agents/${AGENT}`));
      return o.status === 'DEPLOYED' && o.canaryRevision === v1;
    });
    await shot('agent-revisions');
    await page.getByRole('tab', { name: 'Try it' }).click();
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('pre[data-label="Answer"]', { hasText: 'HELLO' }).waitFor({ timeout: WAIT_MS });
    await page.getByLabel('Calls').fill('30');
    await page.getByRole('button', { name: 'Send 30 calls' }).click();
    const tally = page.getByTestId('split-tally');
    await tally.getByText('of 30').first().waitFor({ timeout: WAIT_MS });
    await waitFor(
      '30 answers counted',
      async () =>
        /of 30/.test((await tally.textContent()) ?? '') &&
        !(await page.getByRole('button', { name: 'Send 30 calls' }).isDisabled()),
    );
    const text = (await tally.textContent()) ?? '';
    assert.match(text, /v1/, `the canary answered: ${text}`);
    assert.match(text, /v2/, `the active revision answered: ${text}`);
    await shot('agent-try');
    await page.getByRole('tab', { name: 'Overview' }).click();
    await page.getByRole('img', { name: 'Replica count over time' }).waitFor();
    await page.waitForTimeout(5000);
    await shot('agent');
    await go('/agents');
    await shot('agents');
  });

  it("lists an MCP server's tools and calls one from its form", async () => {
    await mcpDeployed;
    await go(`/functions/${FUNCTION}/try`);
    await page.getByRole('button', { name: /text_stats/ }).waitFor({ timeout: WAIT_MS });
    await page.getByLabel(/^text/).fill('one two three');
    await page.getByRole('button', { name: 'Call tool' }).click();
    await page.locator('pre[data-label="Tool result"]', { hasText: '"words"' }).waitFor({ timeout: WAIT_MS });
    const result = await page.locator('pre[data-label="Tool result"]').first().textContent();
    assert.deepEqual(JSON.parse(result ?? '{}'), { characters: 13, words: 3, lines: 1 });
    await shot('mcp-tools');
  });

  it('starts a job execution whose failing task is retried, and reads its logs', async () => {
    await jobDeployed;
    await go(`/jobs/${JOB}`);
    await page.getByRole('button', { name: 'Start execution' }).click();
    await page.getByLabel(/^Tasks/).fill('[{"name": "ok"}, {"failAttempts": 1, "name": "flaky"}]');
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    const tasks = page.getByRole('table', { name: 'Tasks' });
    await tasks.waitFor({ timeout: WAIT_MS });
    await page.locator('.card-head .badge', { hasText: /^succeeded$/ }).waitFor({ timeout: WAIT_MS });
    const row = tasks.locator('tbody tr').nth(1);
    assert.equal(await row.locator('td').nth(2).textContent(), '2', 'the failing task ran twice');
    await row.getByRole('button', { name: 'Logs' }).click();
    await page
      .locator('pre[aria-label="Task 1 output"]', { hasText: 'failing attempt 1 on purpose' })
      .waitFor({ timeout: WAIT_MS });
    await shot('job-execution');
    await go(`/jobs/${JOB}`);
    await page.getByRole('table', { name: 'Executions' }).waitFor();
    await shot('job');
  });

  it('charts token usage after model calls, and shows what a budget has left', async () => {
    await ok(
      await s.api('/integrations/connections', {
        method: 'POST',
        json: {
          metadata: { name: 'fake-openai' },
          spec: {
            integration: 'openai',
            config: { baseUrl: fake.url },
            secret: { apiKey: 'sk-console-test' },
          },
        },
      }),
    );
    await ok(
      await s.api('/policies', {
        method: 'POST',
        json: {
          metadata: { name: 'daily-budget' },
          spec: { type: 'maxToken', maxTokens: { total: 100_000, granularity: 'day' } },
        },
      }),
    );
    await ok(
      await s.api('/models', {
        method: 'POST',
        json: {
          metadata: { name: MODEL },
          spec: {
            integrationConnections: ['fake-openai'],
            policies: ['daily-budget'],
            runtime: { type: 'openai', model: 'gpt-4o-mini' },
          },
        },
      }),
    );
    await waitFor(
      'the model deployed',
      async () => (await ok(await s.api(`/models/${MODEL}`))).status === 'DEPLOYED',
    );
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${s.url}/run/default/models/${MODEL}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: `hello number ${i}` }] }),
      });
      assert.equal(res.status, 200, await res.text());
    }
    await go(`/models/${MODEL}`);
    await page.getByRole('img', { name: 'Token usage per hour' }).waitFor({ timeout: WAIT_MS });
    await waitFor('five requests counted', async () => {
      const n = await page.locator('.stat', { hasText: 'Requests' }).locator('.stat-value').textContent();
      if (n === '5') return true;
      await page.reload();
      await page.getByRole('heading', { name: MODEL }).waitFor();
      return false;
    });
    await shot('model-usage');
    await go('/models');
    await shot('models');
    await go('/policies');
    await page.getByRole('button', { name: 'daily-budget' }).click();
    await page.getByText(/left of 100,000/).waitFor({ timeout: WAIT_MS });
    await shot('policies');
    await go('/connections');
    await page.getByText('fake-openai').waitFor();
    assert.equal(await page.getByText('sk-console-test').count(), 0, 'the secret is never shown');
    await shot('connections');
  });

  it("shows the workspace's other pages (overview, storage, images, keys, members) in light and dark", async () => {
    await ok(
      await s.api('/volumes', { method: 'POST', json: { metadata: { name: 'data' }, spec: { size: 64 } } }),
    );
    for (const [path, name] of [
      ['/', 'overview'],
      ['/volumes', 'volumes'],
      ['/drives', 'drives'],
      ['/images', 'images'],
      ['/api-keys', 'api-keys'],
      ['/members', 'members'],
      ['/functions', 'mcp-servers'],
      ['/jobs', 'jobs'],
    ] as const) {
      await go(path);
      await page.locator('h1').first().waitFor();
      await page.waitForTimeout(600);
      await shot(name);
    }
    await page.emulateMedia({ colorScheme: 'dark' });
    await go(`/sandboxes/${SANDBOX}`);
    await page.getByRole('heading', { name: SANDBOX }).waitFor();
    await shot('sandbox-dark');
    await go('/');
    await page.waitForTimeout(600);
    await shot('overview-dark');
    await page.setViewportSize({ width: 420, height: 860 });
    await shot('overview-narrow');
    await page.setViewportSize({ width: 1360, height: 860 });
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('a viewer sees no destructive button, and a forged request from the console origin is refused', async () => {
    const sa = await ok(
      await s.api('/service_accounts', { method: 'POST', json: { name: 'console-viewer', role: 'viewer' } }),
    );
    const key = (
      await ok(await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} }))
    ).apiKey;
    const viewer = await (await b.context()).newPage();
    await viewer.goto(`${s.url}/console/`);
    await viewer.getByLabel('API key').fill(key);
    await viewer.getByRole('button', { name: 'Sign in' }).click();
    await viewer.locator('.role-badge', { hasText: 'viewer' }).waitFor();
    for (const path of [
      `/sandboxes/${SANDBOX}`,
      `/agents/${AGENT}`,
      `/jobs/${JOB}`,
      '/volumes',
      '/members',
    ]) {
      await viewer.goto(`${s.url}/console${path}`);
      await viewer
        .locator('h1')
        .first()
        .waitFor()
        .catch(async (err) => {
          throw new Error(
            `${path}: no heading; the page says: ${(await viewer.textContent('body'))?.slice(0, 500)}`,
            {
              cause: err,
            },
          );
        });
      await viewer.waitForTimeout(800);
      for (const name of ['Delete', 'Remove', 'Revoke', 'New sandbox', 'Start execution'])
        assert.equal(
          await viewer.getByRole('button', { name, exact: true }).count(),
          0,
          `${path}: no ${name} button for a viewer`,
        );
    }
    await viewer.goto(`${s.url}/console/sandboxes/${SANDBOX}`);
    await viewer.getByRole('heading', { name: SANDBOX }).waitFor();
    await viewer.screenshot({ path: join(SHOTS, 'viewer-sandbox.png'), fullPage: true });
    // Forged from the console's own origin: with the viewer's key the API refuses (403); with no key, as a
    // cross-site form or script would send it (no cookie carries one), it is a 401.
    // A string, not a function: the test's own transpiler would add helpers the page does not have.
    const statuses = await viewer.evaluate(`(async () => {
      const key = JSON.parse(sessionStorage.getItem('berth.console.session') ?? '{}').key;
      const url = '/v0/sandboxes/${SANDBOX}';
      const del = (init) => fetch(url, { method: 'DELETE', ...init }).then((r) => r.status);
      return {
        withKey: await del({ headers: { authorization: 'Bearer ' + key } }),
        withoutKey: await del({}),
        credentialsInclude: await del({ credentials: 'include' }),
      };
    })()`);
    assert.deepEqual(statuses, { withKey: 403, withoutKey: 401, credentialsInclude: 401 });
    assert.equal(
      (await ok(await s.api(`/sandboxes/${SANDBOX}`))).status,
      'DEPLOYED',
      'the sandbox is still there',
    );
    await viewer.close();
    assert.deepEqual(violations, [], 'no Content Security Policy violation on any page');
  });
});
