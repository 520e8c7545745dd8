// Loads the template catalog from the repository's top-level `templates/` directory: one folder per
// template, each with a `template.json`. `sha` is computed from the files, icons given as file names
// are inlined as data: URLs so the catalog works without a web server for assets.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Value } from '../kinds/typebox.js';
import { type Template, TemplateFile } from './schema.js';

/** `<repo>/templates/`: four levels up from both `src/templates/` (tsx) and `dist/templates/` (built). */
export const DEFAULT_TEMPLATES_DIR = fileURLToPath(new URL('../../../../templates/', import.meta.url));

/** Build output and dependencies are not part of a template. */
const SKIP_DIRS = new Set(['node_modules', 'dist', '__pycache__', '.venv', '.git']);

const ICON_TYPES: Record<string, string> = { '.svg': 'image/svg+xml', '.png': 'image/png' };

/** Every file of the template, relative paths with `/`, sorted (so the sha does not depend on the OS). */
export function templateFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name)) walk(p);
      } else if (e.isFile()) out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

/** sha256 over each file's path and bytes, length-prefixed so no two trees hash alike. */
export function templateSha(dir: string): string {
  const h = createHash('sha256');
  for (const f of templateFiles(dir)) {
    const bytes = readFileSync(join(dir, f));
    h.update(`${f}\0${bytes.length}\0`);
    h.update(bytes);
  }
  return h.digest('hex');
}

function iconUrl(dir: string, value: string): string {
  const type = ICON_TYPES[extname(value)];
  if (/^[a-z]+:/i.test(value) || !type) return value;
  const file = join(dir, value);
  if (!existsSync(file)) throw new Error(`template ${dir}: icon ${value} does not exist`);
  return `data:${type};base64,${readFileSync(file).toString('base64')}`;
}

/** Reads one template folder; throws with the folder and the failing fields when `template.json` is wrong. */
export function loadTemplate(dir: string): Template {
  const raw = JSON.parse(readFileSync(join(dir, 'template.json'), 'utf8'));
  if (!Value.Check(TemplateFile, raw)) {
    const errs = [...Value.Errors(TemplateFile, raw)].map((e) => `${e.path || '/'}: ${e.message}`);
    throw new Error(`template ${dir}/template.json is invalid: ${errs.join('; ')}`);
  }
  const entry = Value.Clean(TemplateFile, structuredClone(raw)) as Omit<Template, 'sha'>;
  return {
    ...entry,
    icon: iconUrl(dir, entry.icon),
    iconDark: iconUrl(dir, entry.iconDark),
    sha: templateSha(dir),
  };
}

/** Every template under `root`, ordered by name. A missing root is an empty catalog. */
export function loadCatalog(root: string = DEFAULT_TEMPLATES_DIR): Template[] {
  if (!existsSync(root)) return [];
  const out: Template[] = [];
  for (const name of readdirSync(root).sort()) {
    const dir = join(root, name);
    if (!statSync(dir).isDirectory() || !existsSync(join(dir, 'template.json'))) continue;
    const t = loadTemplate(dir);
    if (t.name !== name)
      throw new Error(`template ${dir}: name ${JSON.stringify(t.name)} must equal its folder name`);
    out.push(t);
  }
  return out;
}
