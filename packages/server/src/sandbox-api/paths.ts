// Turns a path as the wire carries it into a path on disk: a leading `/` is absolute, `~` is $HOME, anything
// else is relative to the working directory. With a root set (the daemon run outside a sandbox), the path and
// every symlink on it must resolve inside that root. Inside a sandbox the namespaces are the boundary, not this.
import { lstat, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { badRequest, forbidden } from './http.js';

export interface PathOptions {
  workdir: string;
  home: string;
  root?: string;
}

export class PathResolver {
  constructor(readonly opts: PathOptions) {}

  /** Decodes the raw `*rest` of a route (`%2Ftmp%2Fa.txt`, or `/tmp/a.txt` when a client did not encode it). */
  static decode(raw: string): string {
    try {
      return decodeURIComponent(raw);
    } catch {
      throw badRequest(`malformed path encoding: ${raw}`);
    }
  }

  /** The absolute, normalised path the wire path names, before any jail check. */
  lexical(userPath: string): string {
    if (userPath.includes('\0')) throw badRequest('path contains a NUL byte');
    const p = userPath.trim() === '' ? '.' : userPath;
    if (p === '~' || p.startsWith('~/')) return resolve(this.opts.home, p.slice(2));
    if (isAbsolute(p)) return resolve(p);
    return resolve(this.opts.workdir, p);
  }

  /**
   * Resolves a wire path for use. With a root, refuses (403) anything whose real location — after following
   * every symlink of the part that exists — is outside the root. Returns the lexical path, so that an
   * operation on a symlink inside the root (delete, lstat) acts on the link, not on its target.
   */
  async resolve(userPath: string): Promise<string> {
    const abs = this.lexical(userPath);
    await this.check(abs);
    return abs;
  }

  /** Throws 403 if `abs` (absolute) is outside the root. No-op without a root. */
  async check(abs: string): Promise<void> {
    const root = this.opts.root;
    if (!root) return;
    if (!within(root, abs)) throw outside(abs);
    if (!within(root, await realOf(abs))) throw outside(abs);
  }

  /** True when `abs` is allowed; never throws. */
  async allowed(abs: string): Promise<boolean> {
    try {
      await this.check(abs);
      return true;
    } catch {
      return false;
    }
  }
}

function outside(abs: string) {
  return forbidden(`path ${abs} is outside the sandbox root`);
}

export function within(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** Marks a path that cannot be proven to stay inside (a symlink cycle). */
const UNRESOLVABLE = '/\0unresolvable';
/** Deeper symlink chains than the kernel follows (40) are refused too. */
const MAX_LINK_DEPTH = 40;

/**
 * Where `abs` really is: realpath when it exists; for a path about to be created, the real location of its
 * deepest existing ancestor with the missing tail appended; a dangling symlink is followed to where a write
 * through it would land.
 */
async function realOf(abs: string, depth = 0): Promise<string> {
  if (depth > MAX_LINK_DEPTH) return UNRESOLVABLE;
  try {
    return await realpath(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return UNRESOLVABLE;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
  }
  try {
    if ((await lstat(abs)).isSymbolicLink())
      return realOf(resolve(dirname(abs), await readlink(abs)), depth + 1);
  } catch {
    // abs itself does not exist: judge by its parent.
  }
  const parent = dirname(abs);
  if (parent === abs) return abs;
  return join(await realOf(parent, depth + 1), basename(abs));
}
