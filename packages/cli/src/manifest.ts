// `berth.toml` (or the service's `blaxel.toml`) as `berth deploy` reads it. Its keys are of three sorts: `name` and
// `type` say which object; `entrypoint` and `env` are read by the build from the upload; every other key is a field of
// the object's spec (`public`, `region`, `policies`, `[runtime]`, `[[triggers]]`, `[[volumes]]` …). Those are sent
// with `?fieldValidation=Strict`, so the server judges them with the very schema and "did you mean" that `berth
// apply` meets, and its answer is said back in the manifest's own terms (`berth.toml: runtime.memroy: …`). Keys of
// blaxel.toml that Berth has no use for are named in a warning, never ignored in silence.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { ApiFailure } from './client.js';

export const MANIFEST_FILES = ['berth.toml', 'blaxel.toml'] as const;

/** What the build reads itself, and the keys it knows in each. */
const BUILD_KEYS: Record<string, string[] | undefined> = { entrypoint: ['prod', 'dev'], env: undefined };
/** blaxel.toml keys with no meaning here, and why. */
const UNUSED: Record<string, string> = {
  workspace: 'the CLI acts in the workspace of its login (BERTH_WORKSPACE)',
  build: 'builds here take no [build] settings',
  agents: 'an agent reaches others at their addresses; nothing is declared',
  functions: 'an agent reaches MCP servers at their addresses; nothing is declared',
  models: 'an agent reaches models at their addresses; nothing is declared',
};
const TYPES: Record<string, 'agents' | 'functions' | 'jobs'> = {
  agent: 'agents',
  function: 'functions',
  mcp: 'functions',
  job: 'jobs',
};

export interface ManifestObject {
  file?: string;
  plural: 'agents' | 'functions' | 'jobs';
  name: string;
  body: { metadata: { name: string }; spec: Record<string, any> };
  /** Keys of the manifest that became spec fields (so a server complaint about one is said in the file's terms). */
  specKeys: string[];
  warnings: string[];
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63) || 'app';

async function readManifest(dir: string): Promise<{ file?: string; raw: Record<string, any> }> {
  for (const file of MANIFEST_FILES) {
    if (!existsSync(join(dir, file))) continue;
    const { parse } = await import('smol-toml');
    try {
      // As JSON sends it: plain objects (the parser makes null-prototype ones), dates as strings.
      return { file, raw: JSON.parse(JSON.stringify(parse(readFileSync(join(dir, file), 'utf8')))) };
    } catch (e) {
      throw new Error(`${file} is not valid TOML: ${(e as Error).message}`);
    }
  }
  return { raw: {} };
}

/** The object the manifest describes (flags win over the manifest); throws naming the key at fault. */
export async function manifestObject(
  dir: string,
  nameFlag?: string,
  kindFlag?: string,
): Promise<ManifestObject> {
  const { file, raw } = await readManifest(dir);
  const where = file ?? 'the flags';
  const declared = kindFlag ?? raw.type ?? 'agent';
  const plural = typeof declared === 'string' ? TYPES[declared] : undefined;
  if (!plural)
    throw new Error(
      `${kindFlag ? '--kind' : `${where}: type`} ${JSON.stringify(declared)} is not one of agent, function (or mcp), job`,
    );
  const warnings: string[] = [];
  const wanted = nameFlag ?? raw.name ?? basename(resolve(dir));
  if (typeof wanted !== 'string') throw new Error(`${where}: name must be a string`);
  const name = slug(wanted);
  if (name !== wanted)
    warnings.push(
      `${nameFlag ? '--name' : `${where}: name`} ${JSON.stringify(wanted)} is deployed as "${name}"`,
    );
  const spec: Record<string, any> = {};
  const specKeys: string[] = [];
  for (const [k, v] of Object.entries(raw)) {
    if (k === 'name' || k === 'type') continue;
    if (k in BUILD_KEYS) {
      const known = BUILD_KEYS[k];
      if (known && v && typeof v === 'object' && !Array.isArray(v))
        for (const sub of Object.keys(v))
          if (!known.includes(sub))
            throw new Error(`${where}: ${k}.${sub} is not a known field (${k} takes ${known.join(', ')})`);
      continue;
    }
    if (k in UNUSED) {
      warnings.push(`${where}: ${k} is not used here: ${UNUSED[k]}`);
      continue;
    }
    spec[k] = v;
    specKeys.push(k);
  }
  // An MCP server's spec has no repository (the service's has none either): its code is the upload all the same.
  if (plural === 'functions') spec.type = 'mcp';
  else spec.repository = { type: 'upload' };
  return { file, plural, name, body: { metadata: { name }, spec }, specKeys, warnings };
}

/** `/spec/runtime/memroy` → `runtime.memroy`; `/spec/triggers/0/id` → `triggers[0].id`. */
export function manifestKey(pointer: string): string {
  return pointer
    .replace(/^\/spec\//, '')
    .split('/')
    .map((seg, i) => (/^\d+$/.test(seg) ? `[${seg}]` : `${i ? '.' : ''}${seg}`))
    .join('');
}

/**
 * The server's refusal of the deploy's object, said in the manifest's terms where a field came from it:
 * `berth.toml: runtime.memroy: is not a known field; did you mean "memory"?`.
 */
export function manifestProblem(m: ManifestObject, e: ApiFailure): string | undefined {
  const errors: { pointer?: string; message?: string }[] = Array.isArray(e.problem?.errors)
    ? e.problem.errors
    : [];
  const ours = errors.filter((x) => m.specKeys.includes(x.pointer?.split('/')[2] ?? ''));
  if (!m.file || !ours.length) return undefined;
  const rest = errors.filter((x) => !ours.includes(x));
  return [
    ...ours.map((x) => `${m.file}: ${manifestKey(x.pointer ?? '')}: ${x.message}`),
    ...rest.map((x) => `${x.pointer}: ${x.message}`),
  ].join('\n');
}
