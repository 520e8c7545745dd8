// What this server offers, in the service SDK's shapes (decision 047): the MCP and sandbox hubs (from the template
// catalog and the base image), the regions it serves (`/locations`, `/configuration`), the addresses its egress
// leaves from (`/publicIps`), its feature flags (`/features`), its release notes (`/changelog`) and the integration
// kinds it knows (`/integrations/{name}`, models/integrations.ts). Read-only
// descriptions of the server, the same for every workspace; any member of a workspace may read them.
import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { ApiError, notFound } from '../errors.js';
import { DEFAULT_SANDBOX_IMAGE, SANDBOX_MEMORY_MB } from '../kinds/sandbox.js';
import { INTEGRATION_CATALOG } from '../models/integrations.js';
import { loadCatalog } from '../templates/catalog.js';
import type { Template } from '../templates/schema.js';

/** `<repo>/CHANGELOG.md`: three levels up from both `src/api/` (tsx) and `dist/api/` (built). */
export const DEFAULT_CHANGELOG = new URL('../../../../CHANGELOG.md', import.meta.url);

export interface CatalogSettings {
  /** Served regions, the default first (BERTH_REGIONS). */
  regions: string[];
  /** Egress gateway name → the addresses its IPs are allocated from (BERTH_EGRESS_GATEWAYS). */
  egressGateways?: Record<string, string[]>;
  /** The wildcard domain sandboxes and workloads are also served under (BERTH_INFERENCE_HOST). */
  inferenceHost?: string;
  templatesDir?: string;
  changelog?: URL | string;
}

/** One feature of this server: on or off by its settings, never by workspace (Berth has no plans or tiers). */
interface Feature {
  key: string;
  description: string;
  on: (s: CatalogSettings) => boolean;
}

export const FEATURES: Feature[] = [
  { key: 'sandboxes', description: 'sandboxes with standby and previews', on: () => true },
  { key: 'agents', description: 'agents built from code', on: () => true },
  { key: 'functions', description: 'MCP servers built from code', on: () => true },
  { key: 'jobs', description: 'batch jobs', on: () => true },
  { key: 'models', description: 'the model gateway', on: () => true },
  { key: 'volumes', description: 'persistent volumes', on: () => true },
  { key: 'drives', description: 'drives mounted live into sandboxes', on: () => true },
  { key: 'sandbox-schedules', description: 'timed commands in sandboxes', on: () => true },
  {
    key: 'egress-gateways',
    description: 'egress gateways with dedicated addresses (BERTH_EGRESS_GATEWAYS)',
    on: (s) => Object.keys(s.egressGateways ?? {}).length > 0,
  },
  {
    key: 'host-routing',
    description: 'addresses under a wildcard domain (BERTH_INFERENCE_HOST)',
    on: (s) => !!s.inferenceHost,
  },
];

export interface ChangelogEntry {
  date: string;
  title: string;
  content: string;
}

const HEADING = /^## (\d{4}-\d{2}-\d{2}) — (.+)$/;

/** The entries of a changelog in Markdown, one per `## <date> — <title>` heading, in the order written. */
export function parseChangelog(text: string): ChangelogEntry[] {
  const out: ChangelogEntry[] = [];
  let cur: { date: string; title: string; lines: string[] } | undefined;
  const flush = () => {
    if (cur) out.push({ date: cur.date, title: cur.title, content: cur.lines.join('\n').trim() });
  };
  for (const line of text.split('\n')) {
    const m = HEADING.exec(line);
    if (m) {
      flush();
      cur = { date: m[1], title: m[2].trim(), lines: [] };
    } else if (line.startsWith('## '))
      throw new Error(`changelog heading is not "## YYYY-MM-DD — title": ${line}`);
    else cur?.lines.push(line);
  }
  flush();
  return out;
}

const mcpDefinition = (t: Template) => ({
  name: t.name,
  displayName: t.name,
  description: t.description,
  icon: t.icon,
  url: t.url,
  categories: t.topics.map((name) => ({ name })),
  transport: 'http-stream',
  hidden: false,
  enterprise: false,
  coming_soon: false,
});

/** What a sandbox can start from here without any image of its own: the base image (the host's userland). */
export const SANDBOX_HUB = [
  {
    name: 'base-image',
    displayName: 'Base image',
    description: "The server's own userland: Node, Python and a shell. The default of every sandbox.",
    image: DEFAULT_SANDBOX_IMAGE,
    memory: SANDBOX_MEMORY_MB,
    ports: [] as { name?: string; target: number; protocol?: string }[],
    categories: [] as { name: string }[],
    hidden: false,
    enterprise: false,
    coming_soon: false,
  },
];

export function registerCatalogs(v0: FastifyInstance, settings: CatalogSettings) {
  const mcpHub = loadCatalog(settings.templatesDir)
    .filter((t) => t.topics.includes('mcp'))
    .map(mcpDefinition);
  const file = settings.changelog ?? DEFAULT_CHANGELOG;
  const changelog = existsSync(file) ? parseChangelog(readFileSync(file, 'utf8')) : [];
  const gatewayAddresses = Object.values(settings.egressGateways ?? {}).flat();

  v0.get('/mcp/hub', async (req) => {
    requireRole(req, 'viewer');
    return mcpHub;
  });

  v0.get('/sandbox/hub', async (req) => {
    requireRole(req, 'viewer');
    return SANDBOX_HUB;
  });

  v0.get('/locations', async (req) => {
    requireRole(req, 'viewer');
    return settings.regions.map((region) => ({
      region,
      location: region,
      status: 'available',
      flavors: [{ name: 'cpu', type: 'cpu' as const }],
    }));
  });

  v0.get('/configuration', async (req) => {
    requireRole(req, 'viewer');
    return {
      continents: [],
      countries: [],
      privateLocations: [],
      regions: settings.regions.map((name) => ({
        name,
        location: name,
        drivesAvailable: true,
        egressAvailable: gatewayAddresses.length > 0,
        proxyAvailable: true,
      })),
    };
  });

  v0.get('/publicIps', async (req) => {
    requireRole(req, 'viewer');
    const { region } = (req.query ?? {}) as Record<string, string | undefined>;
    if (region !== undefined && !settings.regions.includes(region))
      throw new ApiError('MALFORMED_REQUEST', `region ${JSON.stringify(region)} is not served here`, {
        errors: [{ pointer: '/query/region', message: `served: ${settings.regions.join(', ')}` }],
      });
    return Object.fromEntries(
      settings.regions
        .filter((r) => region === undefined || r === region)
        .map((r) => [
          r,
          {
            description:
              "the addresses Berth's egress gateways send from; a sandbox without a gateway leaves from the host's own address",
            ipv4Cidrs: gatewayAddresses.map((a) => `${a}/32`),
            ipv6Cidrs: [],
          },
        ]),
    );
  });

  v0.get('/features', async (req) => {
    requireRole(req, 'viewer');
    return { features: Object.fromEntries(FEATURES.filter((f) => f.on(settings)).map((f) => [f.key, true])) };
  });

  v0.get('/features/:featureKey', async (req) => {
    requireRole(req, 'viewer');
    const { featureKey } = req.params as { featureKey: string };
    const { account } = (req.query ?? {}) as Record<string, string | undefined>;
    if (account !== undefined)
      throw new ApiError(
        'MALFORMED_REQUEST',
        'Berth has no accounts: its features are the same for every workspace',
        {
          errors: [{ pointer: '/query/account', message: 'not supported' }],
        },
      );
    const f = FEATURES.find((x) => x.key === featureKey);
    if (!f) throw notFound(`feature ${JSON.stringify(featureKey)}`);
    const enabled = f.on(settings);
    return {
      featureKey,
      enabled,
      variant: enabled ? 'on' : 'off',
      evaluatedAt: new Date().toISOString(),
      payload: { description: f.description },
    };
  });

  v0.get('/integrations/:integrationName', async (req) => {
    requireRole(req, 'viewer');
    const { integrationName } = req.params as { integrationName: string };
    const entry = INTEGRATION_CATALOG.get(integrationName);
    if (!entry) throw notFound(`integration ${JSON.stringify(integrationName)}`);
    return entry;
  });

  v0.get('/changelog', async (req) => {
    requireRole(req, 'viewer');
    return { entries: changelog };
  });
}
