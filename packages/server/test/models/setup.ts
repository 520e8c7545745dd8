// Shared setup for the model gateway tests: a real Berth server, fake providers, and helpers that create
// connections and model endpoints the way a user does (through /v0) and wait for them to deploy.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FakeProvider, startFakeProvider } from '../../src/test-support/fake-provider.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../../src/test-support/server.js';

export const PROVIDER_KEY = 'sk-fake-provider-key-9f8e7d6c5b4a';

export interface World {
  server: TestServer;
  fake: FakeProvider;
  close(): Promise<void>;
}

export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const fake = await startFakeProvider({ key: PROVIDER_KEY });
  // The fake provider listens on loopback, which the server's outbound requests reach only when it is listed.
  const server = await startTestServer({ BERTH_LOG_LEVEL: 'debug', ...OUTBOUND_LOOPBACK, ...env });
  return {
    server,
    fake,
    async close() {
      await server.close();
      await fake.close();
    },
  };
}

export async function ok(r: Promise<Response>) {
  const res = await r;
  const text = await res.text();
  assert.ok(res.ok, `${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export async function connection(
  server: TestServer,
  name: string,
  integration: string,
  baseUrl: string,
  apiKey = PROVIDER_KEY,
  /** The Berth key acting (default: the operator's admin key). */
  as?: string,
) {
  return ok(
    server.api('/integrations/connections', {
      method: 'POST',
      json: { metadata: { name }, spec: { integration, config: { baseUrl }, secret: { apiKey } } },
      key: as,
    }),
  );
}

/** Creates a `maxToken` policy (a token budget) of `maxTokens` (its limits and `granularity`, if any). */
export async function budget(
  server: TestServer,
  name: string,
  maxTokens: Record<string, number | string>,
  as?: string,
) {
  return ok(
    server.api('/policies', {
      method: 'POST',
      json: { metadata: { name }, spec: { type: 'maxToken', maxTokens } },
      key: as,
    }),
  );
}

/** Creates a model endpoint and waits until it is DEPLOYED (or FAILED when `expect` says so). */
export async function model(
  server: TestServer,
  name: string,
  spec: Record<string, unknown>,
  expect: 'DEPLOYED' | 'FAILED' | 'DEACTIVATED' = 'DEPLOYED',
  as?: string,
): Promise<any> {
  await ok(server.api('/models', { method: 'POST', json: { metadata: { name }, spec }, key: as }));
  return waitStatus(server, name, expect, as);
}

export async function waitStatus(server: TestServer, name: string, want: string, as?: string): Promise<any> {
  for (let i = 0; i < 400; i++) {
    const m = await ok(server.api(`/models/${name}`, { key: as }));
    if (m.status === want) return m;
    await sleep(25);
  }
  assert.fail(`model ${name} never became ${want}`);
}

export const runUrl = (server: TestServer, name: string, ws = 'default') =>
  `${server.url}/run/${ws}/models/${name}`;

/** Usage rows are written off the request path; poll until `pred` holds. */
export async function eventually<T>(
  read: () => Promise<T>,
  pred: (v: T) => boolean,
  what: string,
): Promise<T> {
  let last: T | undefined;
  // Long enough for a FAILED model's re-check (FAILED_RECHECK_MS) and several usage flushes.
  for (let i = 0; i < 600; i++) {
    last = await read();
    if (pred(last)) return last;
    await sleep(25);
  }
  assert.fail(`${what}: never happened; last value ${JSON.stringify(last)}`);
}
