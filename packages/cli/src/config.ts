// Where the CLI finds its server and credential: ~/.config/berth/config.yaml (XDG_CONFIG_HOME honoured,
// BERTH_CONFIG names another file), overridden per variable by BERTH_URL, BERTH_API_KEY, BERTH_WORKSPACE.
// `berth login` writes it as JSON, which is YAML too: every command reads it with JSON.parse, and loads the YAML
// library (a tenth of a second at start) only for a file a person wrote in YAML's other forms.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export interface CliConfig {
  url: string;
  apiKey: string;
  workspace?: string;
}

type Env = Record<string, string | undefined>;

export function configPath(env: Env = process.env) {
  if (env.BERTH_CONFIG) return env.BERTH_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(base, 'berth', 'config.yaml');
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Synchronous on purpose: every command reads its config first, before anything is awaited.
    return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);
  }
}

function readFile(path: string): Partial<CliConfig> {
  if (!existsSync(path)) return {};
  let v: unknown;
  try {
    const text = readFileSync(path, 'utf8');
    v = text.trim() ? parseText(text) : null;
  } catch (e) {
    throw new Error(`${path} is not valid YAML: ${(e as Error).message}`);
  }
  if (v === null || v === undefined) return {};
  if (typeof v !== 'object' || Array.isArray(v))
    throw new Error(`${path} must hold a mapping (url, apiKey, workspace)`);
  const o = v as Record<string, unknown>;
  const str = (k: string) => (typeof o[k] === 'string' && o[k] ? (o[k] as string) : undefined);
  return { url: str('url'), apiKey: str('apiKey'), workspace: str('workspace') };
}

/** The effective configuration; throws with a hint when no server or key is known. */
export function loadCliConfig(env: Env = process.env): CliConfig {
  const path = configPath(env);
  const file = readFile(path);
  const url = env.BERTH_URL || file.url;
  const apiKey = env.BERTH_API_KEY || file.apiKey;
  const workspace = env.BERTH_WORKSPACE || file.workspace;
  if (!url || !apiKey)
    throw new Error(
      `not logged in: run \`berth login --url <url> --key <key>\` or set BERTH_URL and BERTH_API_KEY (config: ${path})`,
    );
  return { url, apiKey, ...(workspace ? { workspace } : {}) };
}

/** Writes the file readable by its owner only: it holds an API key. */
export function saveCliConfig(cfg: CliConfig, env: Env = process.env) {
  const path = configPath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify(cfg, null, 2)}\n`, { mode: 0o600 });
  // `mode` applies only when the file is created; an existing file keeps its old bits otherwise.
  chmodSync(path, 0o600);
  return path;
}
