// The template catalog (§2.15): `GET /templates` (a bare array) and `GET /templates/{templateName}`.
// Read at start from the repository's `templates/` directory; readable by every role.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { notFound } from '../errors.js';
import { loadCatalog } from './catalog.js';
import type { Template } from './schema.js';

export interface TemplatesOptions {
  /** Directory holding one folder per template; the repository's `templates/` by default. */
  dir?: string;
}

export function registerTemplates(v0: FastifyInstance, opts: TemplatesOptions = {}) {
  const catalog: Template[] = loadCatalog(opts.dir);
  const byName = new Map(catalog.map((t) => [t.name, t]));

  v0.get('/templates', async (req) => {
    requireRole(req, 'viewer');
    return catalog;
  });

  v0.get('/templates/:templateName', async (req) => {
    requireRole(req, 'viewer');
    const { templateName } = req.params as { templateName: string };
    const t = byName.get(templateName);
    if (!t) throw notFound(`template ${JSON.stringify(templateName)}`);
    return t;
  });
}
