// A build's context and the trees COPY reads from: the uploaded archive unpacked safely (the image store's unpacker,
// every name judged beneath the directory), `.dockerignore` applied as Docker applies it (@balena/dockerignore, the
// matcher docker-modem uses), source patterns matched as Go's filepath.Match does (`*` never crosses a `/`), paths
// resolved within a root (a symlink leads elsewhere in that root, never out of it), and a digest of what a COPY would
// take, for its cache key.
import { createHash } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  rmSync,
} from 'node:fs';
import { join, posix } from 'node:path';
import dockerignore from '@balena/dockerignore';
import { applyLayer, isGzip } from '../../runtime/images/unpack.js';

export class ContextError extends Error {
  override name = 'ContextError';
}

/** Symlinks followed while resolving one path before it is called a loop (Linux's own limit). */
const MAX_LINK_HOPS = 40;

/** Unpacks a tar (or tar.gz) context file into `dir`, at most `maxBytes` uncompressed. */
export async function extractContext(file: string, dir: string, maxBytes: number): Promise<void> {
  const head = Buffer.alloc(2);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, 2, 0);
  } finally {
    closeSync(fd);
  }
  try {
    await applyLayer(
      dir,
      createReadStream(file),
      isGzip(head),
      { maxLayerBytes: maxBytes, literal: true },
      'the build context',
    );
  } catch (e) {
    throw new ContextError((e as Error).message);
  }
}

/** Removes what `.dockerignore` excludes (the file itself and the Dockerfile are read before). */
export function applyDockerignore(dir: string): string[] {
  let text: string;
  try {
    text = readFileSync(join(dir, '.dockerignore'), 'utf8');
  } catch {
    return [];
  }
  const patterns = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const ig = dockerignore.default().add(patterns);
  const exceptions = patterns.some((p) => p.startsWith('!'));
  const removed: string[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel))) {
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(dir, r));
      if (ig.ignores(r) && !(exceptions && st.isDirectory())) {
        rmSync(join(dir, r), { recursive: true, force: true });
        removed.push(r);
      } else if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  return removed;
}

/**
 * `path` inside `root`, with every symlink followed within `root` (an absolute target starts again at `root`, `..`
 * stops at it): the absolute path inside the root it names. The last part is followed only when `followLast`.
 */
export function resolveIn(root: string, path: string, followLast = true): string {
  let parts = path.split('/');
  let out: string[] = [];
  let hops = 0;
  while (parts.length) {
    const p = parts.shift() as string;
    if (p === '' || p === '.') continue;
    if (p === '..') {
      out.pop();
      continue;
    }
    const st = lstatSync(join(root, ...out, p), { throwIfNoEntry: false });
    if (st?.isSymbolicLink() && (parts.length > 0 || followLast)) {
      if (++hops > MAX_LINK_HOPS) throw new ContextError(`too many symbolic links in ${path}`);
      const target = readlinkSync(join(root, ...out, p));
      if (target.startsWith('/')) out = [];
      parts = [...target.split('/'), ...parts];
      continue;
    }
    out.push(p);
  }
  return `/${out.join('/')}`;
}

const GLOB = /[*?[]/;

/** Go's filepath.Match as a RegExp: `*` and `?` never match `/`, `[...]` a class (`[^...]` or `[!...]` negated). */
function globRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) throw new ContextError(`bad pattern ${pattern}`);
      let cls = pattern.slice(i + 1, end);
      if (cls.startsWith('!')) cls = `^${cls.slice(1)}`;
      re += `[${cls.replace(/\\/g, '\\\\')}]`;
      i = end;
    } else if (c === '\\' && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
    else re += c.replace(/[.+^${}()|\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * The entries of `root` a COPY source names: the path itself, or every path matching its pattern (as absolute paths
 * inside the root). A source outside the root is refused; one that matches nothing is an error naming it.
 */
export function matchSources(root: string, source: string, what: string): string[] {
  const clean = posix.normalize(`/${source}`);
  if (posix.normalize(source).startsWith('..'))
    throw new ContextError(`${what}: ${source} is outside the build context`);
  if (!GLOB.test(clean)) {
    const at = resolveIn(root, clean, false);
    if (!lstatSync(join(root, at), { throwIfNoEntry: false }))
      throw new ContextError(`${what}: ${source} not found`);
    return [at];
  }
  const parts = clean.split('/').filter(Boolean);
  let found = ['/'];
  for (const part of parts) {
    const next: string[] = [];
    const re = GLOB.test(part) ? globRegExp(part) : undefined;
    for (const dir of found) {
      const real = resolveIn(root, dir);
      const st = lstatSync(join(root, real), { throwIfNoEntry: false });
      if (!st?.isDirectory()) continue;
      if (!re) {
        if (lstatSync(join(root, real, part), { throwIfNoEntry: false })) next.push(posix.join(real, part));
        continue;
      }
      for (const name of readdirSync(join(root, real)).sort())
        if (re.test(name)) next.push(posix.join(real, name));
    }
    found = next;
  }
  if (!found.length) throw new ContextError(`${what}: no file matches ${source}`);
  return found;
}

/** A digest of the entries at these paths of `root` (names, kinds, modes, contents, link targets), recursively. */
export async function digestOf(root: string, paths: string[]): Promise<string> {
  const h = createHash('sha256');
  const visit = async (rel: string) => {
    const p = join(root, rel);
    const st = lstatSync(p);
    h.update(`${rel}\0${st.mode}\0`);
    if (st.isSymbolicLink()) h.update(`l${readlinkSync(p)}\0`);
    else if (st.isFile()) {
      h.update(`f${st.size}\0`);
      for await (const c of createReadStream(p)) h.update(c as Buffer);
    } else if (st.isDirectory()) for (const n of readdirSync(p).sort()) await visit(posix.join(rel, n));
  };
  for (const p of paths) await visit(p);
  return h.digest('hex');
}
