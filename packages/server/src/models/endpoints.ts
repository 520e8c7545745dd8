// What the gateway needs per call, read once and kept: the model endpoint, its connections opened (keys
// decrypted) and its maxToken budgets. Any write to a model, connection or policy drops the cached entries
// of that workspace, so an edit applies to the very next call.
import { ApiError, notFound } from '../errors.js';
import type { Resources } from '../store/resources.js';
import { CONNECTION_KIND, openConnection } from './connections.js';
import { budgetOf, type PolicyBody } from './policies.js';
import { type Connection, type Provider, providerFor } from './providers/index.js';
import type { BudgetPolicy } from './token-budget.js';

export interface Upstream {
  connection: Connection;
  provider: Provider;
}

export interface Endpoint {
  workspace: string;
  name: string;
  /** The provider type of the endpoint (runtime.type): its native API is what passes through. */
  provider: Provider;
  /** runtime.model: used when a request names no model (or names the endpoint itself). */
  model?: string;
  organization?: string;
  /** Usable connections in order: the first, then the fallbacks. */
  upstreams: Upstream[];
  budgets: BudgetPolicy[];
}

const WATCHED = new Set(['Model', CONNECTION_KIND, 'Policy']);

export class EndpointCache {
  private readonly entries = new Map<string, Promise<Endpoint>>();
  private readonly unwatch: () => void;

  constructor(private readonly resources: Resources) {
    this.unwatch = resources.store.watch((c) => {
      if (!WATCHED.has(c.object.kind)) return;
      const prefix = `${c.object.workspace}\u0000`;
      for (const k of this.entries.keys()) if (k.startsWith(prefix)) this.entries.delete(k);
    });
  }

  get(workspace: string, name: string): Promise<Endpoint> {
    const k = `${workspace}\u0000${name}`;
    let p = this.entries.get(k);
    if (!p) {
      p = this.load(workspace, name);
      this.entries.set(k, p);
      // A failed lookup (404, not deployed) is not kept: the next call reads again.
      p.catch(() => this.entries.get(k) === p && this.entries.delete(k));
    }
    return p;
  }

  close() {
    this.unwatch();
    this.entries.clear();
  }

  private async load(workspace: string, name: string): Promise<Endpoint> {
    const { resources } = this;
    const o = await resources.get(resources.kind('Model'), workspace, [], name);
    if (!o) throw notFound(`model ${JSON.stringify(name)}`);
    const status = o.body.status;
    if (status !== 'DEPLOYED') {
      const last = (o.body.events ?? []).at(-1)?.message;
      throw new ApiError('UNAVAILABLE', `model ${name} is ${status}${last ? `: ${last}` : ''}`);
    }
    const spec = o.body.spec;
    const provider = providerFor(spec.runtime?.type);
    if (!provider) throw new ApiError('UNAVAILABLE', `model ${name} has no known provider type`);
    const upstreams: Upstream[] = [];
    for (const c of spec.integrationConnections ?? []) {
      const opened = await openConnection(resources, workspace, c);
      if (opened.ok) upstreams.push({ connection: opened.connection, provider: opened.provider });
    }
    if (!upstreams.length)
      throw new ApiError('UNAVAILABLE', `model ${name} has no usable integration connection`);
    const budgets: BudgetPolicy[] = [];
    for (const p of spec.policies ?? []) {
      const po = await resources.get(resources.kind('Policy'), workspace, [], p);
      const b = po ? budgetOf(workspace, po.body as PolicyBody) : undefined;
      if (b) budgets.push(b);
    }
    return {
      workspace,
      name,
      provider,
      model: spec.runtime?.model,
      organization: spec.runtime?.organization,
      upstreams,
      budgets,
    };
  }
}
