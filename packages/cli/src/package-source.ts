// Packs a source directory into a zip the way the service's CLI does: its default ignore list, or the
// project's `.berthignore` (`.blaxelignore`) instead; `.env` files are never packed. Entries are sorted and dated
// to a fixed time, so the same tree gives the same bytes (and so the same digest: the server stores it once).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type { Ignore } from 'ignore';

/** The service CLI's default ignore list (used when the project has no ignore file of its own). */
export const DEFAULT_IGNORES = [
  '.blaxel',
  '.berth',
  '.git',
  'dist',
  '.venv',
  'venv',
  'node_modules',
  '.next',
  '__pycache__',
];
/** Never packed: local secrets. */
const ALWAYS_IGNORED = ['.env', '.env.*', '.env.build'];
const FIXED_DATE = new Date('2000-01-01T00:00:00Z');

async function ignoreRules(dir: string) {
  // Loaded here, as yazl below: only `deploy` packs, and every other command starts faster without them.
  const { default: ignore } = await import('ignore');
  const ig = ignore().add(ALWAYS_IGNORED);
  const own = ['.berthignore', '.blaxelignore'].find((f) => existsSync(join(dir, f)));
  ig.add(own ? readFileSync(join(dir, own), 'utf8') : DEFAULT_IGNORES);
  return ig;
}

function files(dir: string, root: string, ig: Ignore, out: string[]) {
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const abs = join(dir, e.name);
    const rel = relative(root, abs).split(sep).join('/');
    if (e.isDirectory()) {
      if (!ig.ignores(`${rel}/`)) files(abs, root, ig, out);
    } else if (e.isFile() && !ig.ignores(rel)) out.push(rel);
  }
  return out;
}

/** The zip of `dir` as bytes, its sha256 and the files in it. */
export async function packSource(dir: string): Promise<{ zip: Buffer; digest: string; files: string[] }> {
  const list = files(dir, dir, await ignoreRules(dir), []);
  const { default: yazl } = await import('yazl');
  const zip = new yazl.ZipFile();
  for (const rel of list) {
    const mode = statSync(join(dir, rel)).mode & 0o777;
    zip.addFile(join(dir, rel), rel, { mtime: FIXED_DATE, mode: 0o100000 | mode });
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  const buf = Buffer.concat(chunks);
  return { zip: buf, digest: `sha256:${createHash('sha256').update(buf).digest('hex')}`, files: list };
}
