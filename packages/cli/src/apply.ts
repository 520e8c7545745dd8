// `berth apply -f file.yaml`: create-or-replace (PUT) every document of a multi-document YAML file.
// Every document is parsed and its kind resolved before anything is sent, so a typo changes nothing.
// Each object is reported created, configured or unchanged, judged from the object before and after the PUT. Then,
// unless `--no-wait`, each object that has a status is waited for (through the server's watch) until it settles: one
// that ends FAILED is said with its reason, and the exit status is 1.
import { readFileSync } from 'node:fs';
import type { KindInfo } from '@berth/sdk';
import type { Command } from 'commander';
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
import { yaml } from './output.js';
import { Progress } from './progress.js';
import { outcomeLine, waitFor } from './wait.js';

/** Longest apply waits for one object to settle (a sandbox pulling a large image, a model's first check). */
const WAIT_MS = 10 * 60_000;

interface Planned {
  kd: KindInfo;
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
  yaml()
    .parseAllDocuments(text)
    .forEach((doc, i) => {
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
export function outcomeOf(kd: KindInfo, before: any, after: any): Outcome {
  if (!before) return 'created';
  const fields = (o: any) => [
    o?.metadata?.generation,
    o?.metadata?.labels ?? {},
    o?.metadata?.displayName,
    ...kd.extraInput.map((k) => o?.[k]),
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
    )
    .option('--no-wait', 'do not wait for the objects to be deployed (or to fail)');
  addParentFlags(cmd).action(
    async (o: { filename: string[]; fieldValidation: string; wait: boolean; [k: string]: unknown }) => {
      const planned: Planned[] = [];
      for (const f of o.filename) planned.push(...planDocuments(await readSource(f), f));
      if (!planned.length) throw new Error('no documents to apply');
      const cfg = loadCliConfig();
      const api = new Api(cfg);
      let failed = 0;
      const written: { p: Planned; coll: string }[] = [];
      for (const p of planned) {
        const label = `${p.kd.kind.toLowerCase()}/${p.name}`;
        try {
          const coll = collectionPath(p.kd, o, p.body.metadata);
          const path = itemPath(coll, p.name);
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
          if (p.kd.hasStatus) written.push({ p, coll });
        } catch (e) {
          failed++;
          process.stderr.write(`error: ${label} (${p.source}): ${(e as Error).message}\n`);
        }
      }
      if (o.wait)
        for (const { p, coll } of written) {
          const progress = new Progress();
          const outcome = await waitFor(cfg, p.kd, coll, p.name, progress, WAIT_MS).finally(() =>
            progress.stop(),
          );
          const { line, exitCode } = outcomeLine(p.kd, outcome);
          process.stderr.write(`${line}\n`);
          if (exitCode) failed++;
        }
      // Every document was tried; the exit status still says that some failed.
      if (failed) process.exitCode = 1;
    },
  );
}
