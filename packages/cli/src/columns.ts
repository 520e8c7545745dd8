// The columns `berth get` shows per kind: what tells a person the state of each object at a glance — its status and,
// when it is not serving, why (the reason its last event gives); for agents and functions the revision taking the
// traffic, a canary's share, the replicas running and the address. `-o wide` adds the settings behind them.
import { age } from './format.js';

export interface Column {
  head: string;
  cell: (o: any) => string;
  /** Only with `-o wide`. */
  wide?: boolean;
}

const dash = (v: unknown) => (v === undefined || v === null || v === '' ? '-' : String(v));

/** Why the object is in its status: its last event's message (events are kept oldest first). */
export const reasonOf = (o: any): string | undefined => {
  const events: any[] = Array.isArray(o?.events) ? o.events : [];
  return events.at(-1)?.message;
};

/** The address a client calls: an MCP server's is its `/mcp` path. */
export function addressOf(o: any, kind: string): string | undefined {
  const url: string | undefined = o?.metadata?.url;
  if (!url) return undefined;
  return kind === 'Function' ? `${url.replace(/\/+$/, '')}/mcp` : url;
}

/** The first characters of a revision id, as `git log --oneline` shortens a commit. */
export const shortRevision = (id: unknown) => (typeof id === 'string' && id ? id.slice(0, 12) : '-');

/** `<revision> 10%` when a canary takes a share. */
export function canaryOf(o: any): string {
  const pct = o?.spec?.revision?.canaryPercent ?? 0;
  return o?.canaryRevision && pct > 0 ? `${shortRevision(o.canaryRevision)} ${pct}%` : '-';
}

const NAME: Column = { head: 'NAME', cell: (o) => dash(o?.metadata?.name) };
const STATUS: Column = { head: 'STATUS', cell: (o) => dash(o?.status) };
const AGE: Column = { head: 'AGE', cell: (o) => age(o?.metadata?.createdAt) };
/** Said only when the object is not simply serving: a DEPLOYED object's last event is news, not a reason. */
const REASON: Column = {
  head: 'REASON',
  cell: (o) => (o?.status === 'DEPLOYED' ? '-' : dash(reasonOf(o))),
};
const mb = (n: unknown) => (typeof n === 'number' ? `${n}MB` : '-');

function workloadColumns(kind: string): Column[] {
  return [
    NAME,
    STATUS,
    { head: 'REVISION', cell: (o) => shortRevision(o?.activeRevision) },
    { head: 'CANARY', cell: canaryOf },
    { head: 'REPLICAS', cell: (o) => dash(o?.replicas) },
    { head: 'URL', cell: (o) => dash(addressOf(o, kind)) },
    AGE,
    { head: 'MEMORY', cell: (o) => mb(o?.spec?.runtime?.memory), wide: true },
    {
      head: 'SCALE',
      cell: (o) => `${o?.spec?.runtime?.minScale ?? 0}-${o?.spec?.runtime?.maxScale ?? '-'}`,
      wide: true,
    },
    { head: 'PUBLIC', cell: (o) => (o?.spec?.public ? 'yes' : 'no'), wide: true },
    REASON,
  ];
}

const BY_KIND: Record<string, () => Column[]> = {
  Agent: () => workloadColumns('Agent'),
  Function: () => workloadColumns('Function'),
  Job: () => [
    NAME,
    STATUS,
    { head: 'REVISION', cell: (o) => shortRevision(o?.activeRevision) },
    { head: 'CONCURRENCY', cell: (o) => dash(o?.spec?.runtime?.maxConcurrentTasks) },
    AGE,
    { head: 'MEMORY', cell: (o) => mb(o?.spec?.runtime?.memory), wide: true },
    { head: 'RETRIES', cell: (o) => dash(o?.spec?.runtime?.maxRetries), wide: true },
    { head: 'TIMEOUT', cell: (o) => dash(o?.spec?.runtime?.timeout), wide: true },
    REASON,
  ],
  Sandbox: () => [
    NAME,
    STATUS,
    { head: 'STATE', cell: (o) => dash(o?.state) },
    { head: 'MEMORY', cell: (o) => mb(o?.spec?.runtime?.memory) },
    AGE,
    { head: 'URL', cell: (o) => dash(o?.metadata?.url) },
    { head: 'IMAGE', cell: (o) => dash(o?.spec?.runtime?.image), wide: true },
    {
      head: 'PORTS',
      cell: (o) => dash((o?.spec?.runtime?.ports ?? []).map((p: any) => p.target).join(',')),
      wide: true,
    },
    {
      head: 'VOLUMES',
      cell: (o) => dash((o?.spec?.volumes ?? []).map((v: any) => `${v.name}:${v.mountPath}`).join(',')),
      wide: true,
    },
    REASON,
  ],
  Volume: () => [
    NAME,
    STATUS,
    { head: 'SIZE', cell: (o) => mb(o?.spec?.size) },
    { head: 'ATTACHED TO', cell: (o) => dash(o?.state?.attachedTo) },
    { head: 'TEMPLATE', cell: (o) => dash(o?.spec?.template) },
    AGE,
    REASON,
  ],
  Model: () => [
    NAME,
    STATUS,
    { head: 'PROVIDER', cell: (o) => dash(o?.spec?.runtime?.type) },
    { head: 'MODEL', cell: (o) => dash(o?.spec?.runtime?.model) },
    AGE,
    REASON,
  ],
  Preview: () => [
    NAME,
    STATUS,
    { head: 'PORT', cell: (o) => dash(o?.spec?.port) },
    { head: 'PUBLIC', cell: (o) => (o?.spec?.public ? 'yes' : 'no') },
    { head: 'URL', cell: (o) => dash(o?.spec?.url ?? o?.metadata?.url) },
    AGE,
    REASON,
  ],
  Policy: () => [NAME, { head: 'TYPE', cell: (o) => dash(o?.spec?.type) }, AGE],
  IntegrationConnection: () => [NAME, { head: 'INTEGRATION', cell: (o) => dash(o?.spec?.integration) }, AGE],
};

/** The columns of a kind (with or without the wide ones); kinds not listed show name, status, age and reason. */
export function columnsOf(kind: string, hasStatus: boolean, wide: boolean): Column[] {
  const all = BY_KIND[kind]?.() ?? (hasStatus ? [NAME, STATUS, AGE, REASON] : [NAME, AGE]);
  return all.filter((c) => wide || !c.wide);
}
