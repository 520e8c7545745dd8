// Shared by the tenant OAuth flow tests: the test provider on loopback, the mail API in the egress tests' upstream
// namespace (as https://mail.test, reached by replicas through Berth's egress proxy), a tenant backend from
// examples/tenant-oauth, and a browser that goes through the flow as a user would.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { replicaIdPrefix, workloadKey } from '../../src/controllers/workload/replicas.js';
import { sandboxPaths } from '../../src/runtime/linux/host.js';
import { DaemonClient } from '../../src/sandbox-api/client.js';
import {
  startUpstream,
  UPSTREAM,
  type Upstream,
} from '../../src/runtime/linux/test-support/egress-upstream.js';
import { MAIL_AUDIENCE, MAIL_SCOPE, type TestProvider } from '../../src/test-support/oidc-provider.js';
import type { SandboxServer } from '../sandboxes/support.js';

export const REPO = join(import.meta.dirname, '../../../..');
export const MAIL_TEMPLATE = join(REPO, 'templates/mcp-mail');
export const MAIL_HANDLER = join(REPO, 'packages/server/src/test-support/fake-mail-api.cjs');
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A loopback port held until its server starts (for a server whose address must be known before it starts: a
 * registered redirect URI). Held rather than probed and freed: another test file binding port 0 meanwhile could
 * otherwise be given it.
 */
export interface PortHold {
  port: number;
  /** Frees the port for its server; call right before that server listens. Idempotent. */
  release(): Promise<void>;
}

export async function holdPort(): Promise<PortHold> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  let freed: Promise<void> | undefined;
  const release = () => {
    freed ??= new Promise<void>((r) => srv.close(() => r()));
    return freed;
  };
  return { port, release };
}

export interface MailApi {
  up: Upstream;
  /**
   * Mails the API accepted with this subject, in order, once there is one (within 10 s): the API says what it accepted
   * on its stdout, which reaches this process after its answer may have reached the caller.
   */
  sent(subject: string): Promise<{ id: string; from: string; to: string; subject: string; text: string }[]>;
  /** Its auth decisions (`ok <email>`, `refused <reason>`). */
  auth(): string[];
  stop(): Promise<void>;
}

/**
 * The mail API (test-support/fake-mail-api.cjs) on the upstream namespace's 443 as mail.test, trusting only `idp`'s
 * tokens; the server process's NODE_EXTRA_CA_CERTS is pointed at the upstream's CA (as an operator trusts a private
 * upstream) so that Berth's egress proxy verifies it.
 */
export async function startMailApi(idp: TestProvider): Promise<MailApi> {
  const up = await startUpstream(UPSTREAM, {
    httpsHandler: MAIL_HANDLER,
    env: {
      MAIL_JWK: JSON.stringify(idp.publicJwk),
      MAIL_ISSUER: idp.issuer,
      MAIL_AUDIENCE,
      MAIL_SCOPE,
    },
  });
  const caDir = mkdtempSync(join(tmpdir(), 'berth-mail-ca-'));
  writeFileSync(join(caDir, 'ca.pem'), up.certPem);
  const saved = process.env.NODE_EXTRA_CA_CERTS;
  process.env.NODE_EXTRA_CA_CERTS = join(caDir, 'ca.pem');
  return {
    up,
    async sent(subject) {
      const of = () =>
        up.lines
          .filter((l) => l.startsWith('MAIL '))
          .map((l) => JSON.parse(l.slice(5)))
          .filter((m) => m.subject === subject);
      for (let i = 0; i < 100 && !of().length; i++) await new Promise((r) => setTimeout(r, 100));
      return of();
    },
    auth: () => up.lines.filter((l) => l.startsWith('AUTH ')).map((l) => l.slice(5)),
    async stop() {
      await up.stop();
      if (saved === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
      else process.env.NODE_EXTRA_CA_CERTS = saved;
      rmSync(caDir, { recursive: true, force: true });
    },
  };
}

/** What Berth needs to reach the provider (loopback) and the mail API (its namespace, its DNS). */
export const berthEnv = () => ({
  // Info: the refreshes and the egress proxy's lines are logged, and the tests check no token is among them.
  BERTH_LOG_LEVEL: 'info',
  BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8',
  BERTH_EGRESS_RESOLVERS: UPSTREAM.address,
  BERTH_SANDBOX_ALLOW_CIDRS: UPSTREAM.cidr,
});

/**
 * Goes through the flow in a fresh browser context as `user`: signs in to the tenant app, presses connect, logs in
 * and consents at the provider; resolves with the tenant page it lands on (its text).
 */
export async function connectInBrowser(
  browser: Browser,
  backendUrl: string,
  user: string,
): Promise<{ text: string; url: string }> {
  const ctx = await browser.newContext();
  try {
    const page = await ctx.newPage();
    page.setDefaultTimeout(20_000);
    await page.goto(backendUrl);
    await page.fill('input[name=user]', user);
    await page.click('#login');
    await page.click('#connect');
    // The provider: its login form, then its consent page (unless it refused the request before either).
    if (await page.locator('input[name=login]').count()) {
      await page.fill('input[name=login]', user);
      await page.fill('input[name=password]', 'any');
      await page.click('button[type=submit]');
      await page.waitForLoadState();
      if (!page.url().startsWith(backendUrl)) await page.click('button[type=submit]');
    }
    await page.waitForLoadState();
    return { text: await page.innerText('body'), url: page.url() };
  } finally {
    await ctx.close();
  }
}

/** Polls the function until `pred` holds for it. */
export async function waitForFunction(
  s: SandboxServer,
  key: string,
  name: string,
  pred: (o: any) => boolean,
  what: string,
  tries = 900,
): Promise<any> {
  let o: any;
  for (let i = 0; i < tries; i++) {
    o = await (await s.api(`/functions/${name}`, { key })).json();
    if (pred(o)) return o;
    await sleep(200);
  }
  assert.fail(`function ${name} never became ${what}: ${JSON.stringify(o?.events?.slice(-3))}`);
}

/**
 * Runs a shell command in a live replica of the function (woken first by a request through the gateway); its output.
 * Through the replica's daemon socket, found from the data dir: a second runtime driver would take over the
 * replicas' egress policies.
 */
export async function inReplica(
  s: Pick<SandboxServer, 'url' | 'dataDir'>,
  key: string,
  workspace: string,
  fn: string,
  command: string,
) {
  // Just after a server start its replicas may be being replaced (an intercepted replica is never re-adopted): the
  // gateway answers 503 with Retry-After meanwhile, and a client waits as told.
  let wake = await fetch(`${s.url}/run/${workspace}/functions/${fn}/health`, {
    headers: { authorization: `Bearer ${key}` },
  });
  for (let i = 0; i < 60 && wake.status === 503 && wake.headers.get('retry-after'); i++) {
    await new Promise((r) => setTimeout(r, 500));
    wake = await fetch(`${s.url}/run/${workspace}/functions/${fn}/health`, {
      headers: { authorization: `Bearer ${key}` },
    });
  }
  assert.equal(wake.status, 200, `function ${fn} answers`);
  const prefix = replicaIdPrefix(workloadKey(workspace, 'Function', fn), '').replace(/-+$/, '-');
  const id = readdirSync(join(s.dataDir, 'sandboxes')).find((i) => i.startsWith(prefix));
  assert.ok(id, `function ${fn} has a replica`);
  const p = await DaemonClient.at(sandboxPaths(s.dataDir, id).socketPath).start({
    command,
    waitForCompletion: true,
    timeout: 60,
  } as any);
  return { code: p.exitCode, out: p.logs ?? '' };
}
