// The model gateway: provider adapters, OpenAI <-> Anthropic translation, token budgets of maxToken
// policies and usage metering. `createModelGateway` builds its long-lived parts once; models/http-route.ts
// is its HTTP entry and models/routes.ts its /v0 read-outs.
import type { Agent } from 'undici';
import type { Authenticator } from '../auth/access.js';
import type { Outbound } from '../outbound/index.js';
import type { Resources } from '../store/resources.js';
import { BudgetLedger } from './budget-ledger.js';
import { CallerResolver } from './caller.js';
import { EndpointCache } from './endpoints.js';
import { DEFAULT_OUTPUT_ESTIMATE } from './estimate.js';
import { ModelMetrics } from './metrics.js';
import { tokenCounter } from './token-counter.js';
import { UnreachableProviders } from './unreachable.js';
import { UsageRecorder } from './usage-recorder.js';
import { EVERY_WORKSPACE } from '../store/store.js';

/** Sockets kept open to a provider when idle: a new TLS handshake costs more than the whole gateway hop. */
export const UPSTREAM_KEEPALIVE_MS = 60_000;
/** Connections per provider origin; a streamed answer holds one for its whole length. */
export const UPSTREAM_CONNECTIONS = 256;
/** A long non-streamed generation can take minutes before the first byte. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 600_000;

export interface ModelGatewayDeps {
  resources: Resources;
  authenticator: Authenticator;
  /** The outbound client: every provider connection is dialled at an address its rules open. */
  outbound: Outbound;
  /** prom-client registry to add the gateway's series to (api/metrics.ts owns it). */
  registry?: import('prom-client').Registry;
  /** Headers timeout and between-chunk body timeout for provider calls. */
  upstreamTimeoutMs?: number;
  /**
   * Output tokens reserved for a call that sets no max_tokens of its own, and its cap under a budget limiting
   * output (default DEFAULT_OUTPUT_ESTIMATE).
   */
  outputEstimate?: number;
  now?: () => number;
  onError?: (err: unknown) => void;
}

export interface ModelGateway {
  resources: Resources;
  callers: CallerResolver;
  endpoints: EndpointCache;
  /** Token budgets, durable in the store. */
  budget: BudgetLedger;
  recorder: UsageRecorder;
  metrics: ModelMetrics;
  agent: Agent;
  upstreamTimeoutMs: number;
  outputEstimate: number;
  now: () => number;
  /** Says on a model's object that a provider could not be reached. */
  unreachable: UnreachableProviders;
  /** Calls whose accounting waits for a token count (meter.ts): closing waits for them before the last flush. */
  unsettled: Set<Promise<unknown>>;
  close(): Promise<void>;
}

export function createModelGateway(deps: ModelGatewayDeps): ModelGateway {
  const now = deps.now ?? Date.now;
  const recorder = new UsageRecorder(deps.resources.store, deps.onError);
  recorder.start();
  const agent = deps.outbound.agent({
    keepAliveTimeout: UPSTREAM_KEEPALIVE_MS,
    keepAliveMaxTimeout: UPSTREAM_KEEPALIVE_MS,
    connections: UPSTREAM_CONNECTIONS,
  });
  const endpoints = new EndpointCache(deps.resources);
  // The tokenizer's thread starts when budgets first exist (start-up, or a maxToken policy written), so that the
  // first model call does not wait for its tables to load; it stops with the last gateway of the process.
  tokenCounter.retain();
  const warm = () => tokenCounter.start();
  const isBudget = (o: { kind: string; body?: any }) =>
    o.kind === 'Policy' && o.body?.spec?.type === 'maxToken';
  const unwatchPolicies = deps.resources.store.watch((c) => {
    if (isBudget(c.object)) warm();
  });
  deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'Policy' }).then(
    (ps) => ps.some(isBudget) && warm(),
    () => {},
  );
  const callers = new CallerResolver(deps.authenticator, deps.resources.store, now);
  const budget = new BudgetLedger(deps.resources.store, now, deps.onError);
  const unsettled = new Set<Promise<unknown>>();
  return {
    resources: deps.resources,
    callers,
    endpoints,
    budget,
    recorder,
    metrics: new ModelMetrics(deps.registry),
    agent,
    upstreamTimeoutMs: deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
    outputEstimate: deps.outputEstimate ?? DEFAULT_OUTPUT_ESTIMATE,
    now,
    unreachable: new UnreachableProviders(deps.resources, now, deps.onError),
    unsettled,
    async close() {
      unwatchPolicies();
      callers.close();
      endpoints.close();
      await Promise.allSettled(unsettled);
      await recorder.close();
      await budget.close();
      await tokenCounter.release();
      // In-flight provider calls were aborted with their clients; idle sockets go now.
      await agent.destroy();
    },
  };
}
