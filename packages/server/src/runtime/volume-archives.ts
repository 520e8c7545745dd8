// Uploaded volume template versions: one archive file per version, scoped by workspace on disk,
//   <dataDir>/volume-templates/<workspace>/<template>/<versionId>.tar
// written as a temporary file and renamed once complete and within the cap, so a crash mid-upload leaves a
// `.part` file that nothing reads (and the next upload of any version of that template sweeps).
import { createWriteStream, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';

export const ARCHIVES_SUBDIR = 'volume-templates';
const PLAIN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const VERSION_ID = /^[0-9a-f-]{36}$/;

export class ArchiveTooLarge extends Error {
  constructor(readonly capBytes: number) {
    super(`the archive is larger than ${capBytes} bytes`);
    this.name = 'ArchiveTooLarge';
  }
}

function templateDir(dataDir: string, workspace: string, template: string): string {
  if (!PLAIN.test(workspace) || !PLAIN.test(template))
    throw new Error(`invalid template reference ${workspace}/${template}`);
  return join(dataDir, ARCHIVES_SUBDIR, workspace, template);
}

export function archivePath(dataDir: string, workspace: string, template: string, versionId: string): string {
  if (!VERSION_ID.test(versionId)) throw new Error(`invalid version id ${versionId}`);
  return join(templateDir(dataDir, workspace, template), `${versionId}.tar`);
}

/** The archive's path when it was uploaded completely, else undefined. */
export function existingArchive(
  dataDir: string,
  workspace: string,
  template: string,
  versionId: string,
): string | undefined {
  const p = archivePath(dataDir, workspace, template, versionId);
  return statSync(p, { throwIfNoEntry: false })?.isFile() ? p : undefined;
}

/**
 * Streams `body` to the version's archive, failing with ArchiveTooLarge past `capBytes` (nothing is kept then).
 * Returns the number of bytes written.
 */
export async function saveArchive(
  dataDir: string,
  workspace: string,
  template: string,
  versionId: string,
  body: NodeJS.ReadableStream,
  capBytes: number,
): Promise<number> {
  const dir = templateDir(dataDir, workspace, template);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const f of readdirSync(dir)) if (f.endsWith('.part')) rmSync(join(dir, f), { force: true });
  const final = archivePath(dataDir, workspace, template, versionId);
  const part = `${final}.part`;
  let n = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      n += chunk.length;
      if (n > capBytes) done(new ArchiveTooLarge(capBytes));
      else done(null, chunk);
    },
  });
  try {
    await pipeline(body, cap, createWriteStream(part, { mode: 0o600 }));
  } catch (e) {
    rmSync(part, { force: true });
    throw e;
  }
  renameSync(part, final);
  return n;
}

export function removeArchive(dataDir: string, workspace: string, template: string, versionId: string): void {
  rmSync(archivePath(dataDir, workspace, template, versionId), { force: true });
}

/** Entries an archive may hold: plain files, directories and links (no devices, fifos or sockets). */
const ENTRY_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

/**
 * Why the archive cannot seed a volume, or undefined when it can: not a tar (or tar.gz), or an entry whose path is
 * absolute or climbs out with `..` (extraction refuses those too; this says so at upload, where the user is).
 */
export async function archiveProblem(file: string): Promise<string | undefined> {
  let problem: string | undefined;
  let entries = 0;
  try {
    await tar.t({
      file,
      strict: true,
      onReadEntry: (e) => {
        entries++;
        const parts = e.path.split('/');
        if (!problem && (e.path.startsWith('/') || parts.includes('..')))
          problem = `entry ${JSON.stringify(e.path)} would be written outside the volume`;
        if (!problem && !ENTRY_TYPES.has(e.type))
          problem = `entry ${JSON.stringify(e.path)} is a ${e.type}; only files, directories and links are allowed`;
        if (!problem && (e.type === 'SymbolicLink' || e.type === 'Link') && escapes(e.path, e.linkpath ?? ''))
          problem = `link ${JSON.stringify(e.path)} points outside the volume`;
        e.resume();
      },
    });
  } catch (err) {
    return `not a tar or tar.gz archive: ${(err as Error).message}`;
  }
  if (!problem && entries === 0) return 'not a tar or tar.gz archive: no entries';
  return problem;
}

/** Whether a link target, resolved from the link's own directory, leaves the archive's root. */
function escapes(path: string, target: string): boolean {
  if (target.startsWith('/')) return true;
  let depth = path.split('/').filter((p) => p && p !== '.').length - 1;
  for (const part of target.split('/')) {
    if (part === '..') depth--;
    else if (part && part !== '.') depth++;
    if (depth < 0) return true;
  }
  return false;
}

/**
 * Deletes archives no template version names any more: those of templates deleted (the generic DELETE removes the
 * record only) and `.part` files of uploads a crash cut short. `kept(workspace, template)` gives the version ids
 * still named, or undefined when the template is gone. Run once at start.
 */
export function sweepArchives(
  dataDir: string,
  kept: (workspace: string, template: string) => Set<string> | undefined,
): string[] {
  const root = join(dataDir, ARCHIVES_SUBDIR);
  const removed: string[] = [];
  const dirs = (p: string) =>
    statSync(p, { throwIfNoEntry: false })?.isDirectory()
      ? readdirSync(p, { withFileTypes: true }).filter((e) => e.isDirectory() && PLAIN.test(e.name))
      : [];
  for (const ws of dirs(root))
    for (const t of dirs(join(root, ws.name))) {
      const dir = join(root, ws.name, t.name);
      const ids = kept(ws.name, t.name);
      for (const f of readdirSync(dir)) {
        if (ids?.has(f.replace(/\.tar$/, '')) && f.endsWith('.tar')) continue;
        rmSync(join(dir, f), { recursive: true, force: true });
        removed.push(join(ws.name, t.name, f));
      }
      if (!ids) rmSync(dir, { recursive: true, force: true });
    }
  return removed;
}
