// `berth apply -f file.yaml`: create-or-replace (PUT) every document of a multi-document YAML file.
// Every document is parsed and its kind resolved before anything is sent, so a typo changes nothing.
import { readFileSync } from 'node:fs';
import type { KindDescriptor } from '@berth/server/kinds/types.js';
import type { Command } from 'commander';
import YAML from 'yaml';
import { Api, addParentFlags, collectionPath, itemPath, resolveKind } from './client.js';
import { loadCliConfig } from './config.js';

interface Planned {
  kd: KindDescriptor;
  name: string;
  body: Record<string, any>;
  source: string;
}

async function readSource(file: string) {
  if (file !== '-') return readFileSync(file, 'utf8');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The documents of one file; throws naming the file and document number on the first bad one. */
export function planDocuments(text: string, file: string): Planned[] {
  const out: Planned[] = [];
  YAML.parseAllDocuments(text).forEach((doc, i) => {
    const where = `${file === '-' ? 'stdin' : file}, document ${i + 1}`;
    if (doc.errors.length) throw new Error(`${where}: ${doc.errors[0].message}`);
    const v = doc.toJS();
    if (v === null || v === undefined) return;
    if (typeof v !== 'object' || Array.isArray(v))
      throw new Error(`${where}: must be a mapping with kind, metadata and spec`);
    const { kind, ...body } = v as Record<string, any>;
    if (typeof kind !== 'string' || !kind) throw new Error(`${where}: needs \`kind:\` (e.g. kind: Policy)`);
    const kd = resolveKind(kind);
    const name = body.metadata?.name;
    if (typeof name !== 'string' || !name) throw new Error(`${where}: needs metadata.name`);
    out.push({ kd, name, body, source: where });
  });
  return out;
}

export function registerApply(program: Command) {
  const cmd = program
    .command('apply')
    .description(
      'create or update objects from YAML (`-f -` reads stdin); each document has kind, metadata, spec',
    )
    .requiredOption('-f, --filename <file...>', 'YAML file(s) with one or more documents, or - for stdin')
    .option(
      '--field-validation <mode>',
      'Strict rejects unknown fields; Warn drops them with a warning',
      'Strict',
    );
  addParentFlags(cmd).action(
    async (o: { filename: string[]; fieldValidation: string; [k: string]: unknown }) => {
      const planned: Planned[] = [];
      for (const f of o.filename) planned.push(...planDocuments(await readSource(f), f));
      if (!planned.length) throw new Error('no documents to apply');
      const api = new Api(loadCliConfig());
      let failed = 0;
      for (const p of planned) {
        const label = `${p.kd.kind.toLowerCase()}/${p.name}`;
        try {
          const path = itemPath(collectionPath(p.kd, o, p.body.metadata), p.name);
          const { headers } = await api.call('PUT', path, {
            body: p.body,
            query: { fieldValidation: o.fieldValidation },
          });
          const warning = headers.get('warning');
          if (warning) process.stderr.write(`warning: ${label}: ${warning}\n`);
          process.stdout.write(`${label} configured\n`);
        } catch (e) {
          failed++;
          process.stderr.write(`error: ${label} (${p.source}): ${(e as Error).message}\n`);
        }
      }
      // Every document was tried; the exit status still says that some failed.
      if (failed) process.exitCode = 1;
    },
  );
}
