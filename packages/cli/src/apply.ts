// `berth apply -f file.yaml`: create-or-replace (PUT) every document of a multi-document YAML file.
// Every document is parsed and its kind resolved before anything is sent, so a typo changes nothing.
// Each object is reported created, configured or unchanged, judged from the object before and after the PUT.
import { readFileSync } from 'node:fs';
import type { KindDescriptor } from '@berth/server/kinds/types.js';
import type { Command } from 'commander';
import YAML from 'yaml';
import {
  Api,
  ApiFailure,
  addParentFlags,
  collectionPath,
  itemPath,
  resolveKind,
  warningLines,
} from './client.js';
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

/** JSON with keys sorted, so two maps that differ only in key order compare equal. */
const canonical = (v: unknown): string =>
  JSON.stringify(v ?? null, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );

export type Outcome = 'created' | 'configured' | 'unchanged';

/**
 * What a PUT did, from the object before it (undefined: there was none) and the answer. The server bumps
 * `generation` only when the spec changes; labels, displayName and a kind's top-level fields beside spec are
 * compared directly.
 */
export function outcomeOf(kd: KindDescriptor, before: any, after: any): Outcome {
  if (!before) return 'created';
  const fields = (o: any) => [
    o?.metadata?.generation,
    o?.metadata?.labels ?? {},
    o?.metadata?.displayName,
    ...Object.keys(kd.extraInput ?? {}).map((k) => o?.[k]),
  ];
  return canonical(fields(before)) === canonical(fields(after)) ? 'unchanged' : 'configured';
}

/** The object as it is now, or undefined when there is none (404). */
async function current(api: Api, path: string) {
  try {
    return (await api.call('GET', path)).body;
  } catch (e) {
    if (e instanceof ApiFailure && e.status === 404) return undefined;
    throw e;
  }
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
          const before = await current(api, path);
          const { body, headers } = await api.call('PUT', path, {
            body: p.body,
            query: { fieldValidation: o.fieldValidation },
          });
          // The body's warnings carry suggestions; the header is what a server without them sends.
          const warning = headers.get('warning');
          const lines = warningLines(label, body);
          if (lines) process.stderr.write(lines);
          else if (warning) process.stderr.write(`warning: ${label}: ${warning}\n`);
          process.stdout.write(`${label} ${outcomeOf(p.kd, before, body)}\n`);
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
