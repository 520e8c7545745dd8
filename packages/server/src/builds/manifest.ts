// `berth.toml`, else `blaxel.toml` (the service's own manifest, same fields): the part a build reads. The CLI
// maps the rest ([runtime], triggers, public) into the object's spec before uploading.
import { parse } from 'smol-toml';

export interface Manifest {
  /** Which file it came from, for messages. */
  file: 'berth.toml' | 'blaxel.toml';
  type?: string;
  name?: string;
  /** `[entrypoint] prod`: the start command, which wins over any detection. */
  prod?: string;
  /** `[env]`: plain (non-secret) variables given to every replica. */
  env: Record<string, string>;
  /** The whole parsed table, for the CLI. */
  raw: Record<string, unknown>;
}

export class ManifestError extends Error {
  override name = 'ManifestError';
}

export const MANIFEST_FILES = ['berth.toml', 'blaxel.toml'] as const;

/** Parses a manifest's text; a wrong shape throws ManifestError naming the field and showing a sample. */
export function parseManifest(file: Manifest['file'], text: string): Manifest {
  let raw: Record<string, unknown>;
  try {
    raw = parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new ManifestError(`${file} is not valid TOML: ${(err as Error).message}`);
  }
  const entry = raw.entrypoint;
  if (entry !== undefined && (typeof entry !== 'object' || entry === null || Array.isArray(entry)))
    throw new ManifestError(
      `${file}: "entrypoint" must be a table, e.g.\n[entrypoint]\nprod = "node dist/index.js"`,
    );
  const prod = (entry as Record<string, unknown> | undefined)?.prod;
  if (prod !== undefined && (typeof prod !== 'string' || !prod.trim()))
    throw new ManifestError(`${file}: "entrypoint.prod" must be a non-empty command string`);
  const envTable = raw.env ?? {};
  if (typeof envTable !== 'object' || envTable === null || Array.isArray(envTable))
    throw new ManifestError(`${file}: "env" must be a table of names to values`);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(envTable)) {
    if (typeof v === 'object') throw new ManifestError(`${file}: env.${k} must be a plain value`);
    env[k] = String(v);
  }
  return {
    file,
    type: typeof raw.type === 'string' ? raw.type : undefined,
    name: typeof raw.name === 'string' ? raw.name : undefined,
    prod: prod as string | undefined,
    env,
    raw,
  };
}
