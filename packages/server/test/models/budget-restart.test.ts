// Token budgets survive `berth serve` killed with SIGKILL (decision 057): a budget of 1,000 output tokens, calls of
// 50 from four clients at once, the server killed twice mid-way and started again on the same data dir. The calls
// that reach the provider never write more than the budget between the three incarnations, and the claims a killed
// server leaves unused cost at most a block each (LEASE_SHARE).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { blockOf } from '../../src/models/budget-ledger.js';
import { startFakeProvider } from '../../src/test-support/fake-provider.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { ChaosServer } from '../chaos/server.js';

const BUDGET = 1000;
const MAX_TOKENS = 50;

test('a token budget holds across kill -9 and restart: no more than the limit reaches the provider', async (t) => {
  const fake = await startFakeProvider({ key: 'sk-restart' });
  const s = new ChaosServer({ ...OUTBOUND_LOOPBACK });
  await s.start();
  try {
    const must = async (path: string, body: unknown) => {
      const a = await s.call('POST', path, body);
      assert.equal(a.status, 200, `${path}: ${a.text}`);
    };
    await must('/v0/integrations/connections', {
      metadata: { name: 'llm' },
      spec: { integration: 'openai', config: { baseUrl: fake.url }, secret: { apiKey: 'sk-restart' } },
    });
    await must('/v0/policies', {
      metadata: { name: 'budget' },
      spec: { type: 'maxToken', maxTokens: { output: BUDGET, granularity: 'day' } },
    });
    await must('/v0/models', {
      metadata: { name: 'm' },
      spec: {
        integrationConnections: ['llm'],
        policies: ['budget'],
        runtime: { type: 'openai', model: 'gpt-4o-mini' },
      },
    });
    for (let i = 0; ; i++) {
      const a = await s.call('GET', '/v0/models/m');
      if (a.body?.status === 'DEPLOYED') break;
      assert.ok(i < 100, `the model never deployed: ${a.text}`);
      await sleep(100);
    }
    const served = () => fake.requests.filter((r) => r.path.endsWith('/chat/completions')).length;
    const statuses: Record<string, number> = {};
    let stop = false;
    const client = async () => {
      while (!stop) {
        const a = await s.call('POST', '/run/default/models/m/v1/chat/completions', {
          messages: [{ role: 'user', content: 'Hello' }],
          max_tokens: MAX_TOKENS,
        });
        statuses[a.status] = (statuses[a.status] ?? 0) + 1;
        await sleep(a.status === 429 ? 100 : 10);
      }
    };
    const clients = [client(), client(), client(), client()];
    // Killed after about a quarter and a half of the budget reached the provider, with calls in flight.
    for (const mark of [5, 10]) {
      while (served() < mark) await sleep(5);
      await s.kill();
    }
    // Then until the budget is refused for a while.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const before = statuses[429] ?? 0;
      await sleep(1000);
      if ((statuses[429] ?? 0) - before >= 8) break;
    }
    stop = true;
    await Promise.all(clients);
    const tokens = served() * MAX_TOKENS;
    t.diagnostic(
      `granted ${tokens} of ${BUDGET} output tokens across 2 kills; answers ${JSON.stringify(statuses)}`,
    );
    assert.ok(tokens <= BUDGET, `${tokens} output tokens reached the provider for a budget of ${BUDGET}`);
    // Each killed server may take with it its unused block and the reservations of its calls in flight.
    const lost = 2 * (blockOf(BUDGET) + 4 * MAX_TOKENS);
    assert.ok(
      tokens >= BUDGET - lost,
      `only ${tokens} of ${BUDGET} tokens were granted (statuses ${JSON.stringify(statuses)})`,
    );
    assert.ok((statuses[429] ?? 0) > 0, 'the budget was never refused');
  } finally {
    await s.stop();
    await fake.close();
  }
});
