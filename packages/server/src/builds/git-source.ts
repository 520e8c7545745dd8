// `spec.repository {type: git, url, branch?}`: a shallow clone of one branch, packed the way an upload is
// (a zip in the code store, by digest), so a repository and an upload share the build path and the same tree
// builds once. The clone runs on the host with git made inert: no hooks (empty template, hooksPath /dev/null), no
// submodules, symlinks checked out as plain files, no system or user config, no credential prompt, only the URL's
// own protocol allowed, redirects refused; it is bounded in time and bytes. Local paths and file:// are refused
// unless the server allows them (BERTH_GIT_ALLOW_LOCAL=true): a workspace member must not read the server's own
// disk through a clone. Hosts follow the outbound rules (outbound/): the host is resolved and judged once here, and
// git (curl underneath) is pinned to exactly those addresses (http.curloptResolve), so it never resolves the name
// itself and cannot be rebound elsewhere. git:// is not fetched: its connections cannot be pinned.
import { spawn } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import yazl from 'yazl';
import { type Outbound, OutboundRefused } from '../outbound/index.js';
import type { CodeStore, StoredCode } from './code-store.js';
import { MAX_UPLOAD_BYTES } from './code-store.js';

/** A clone taking longer is stopped: a shallow clone of one branch is seconds unless the host is unreachable. */
export const GIT_CLONE_TIMEOUT_MS = 5 * 60_000;
/** Bytes a clone may write, checked while it runs: as large as an upload may be. */
export const GIT_MAX_BYTES = MAX_UPLOAD_BYTES;
/** How often the clone's size is measured. */
const SIZE_CHECK_MS = 1_000;
/** Characters of git's own error kept in the FAILED event. */
const ERROR_CHARS = 2_000;
const FIXED_DATE = new Date('2000-01-01T00:00:00Z');

export interface GitRepository {
  url: string;
  branch?: string;
}

/** What a fetched repository recorded beside the source digest. */
export interface GitSourceInfo extends StoredCode {
  url: string;
  branch?: string;
  commit: string;
}

export class GitFetchError extends Error {
  override name = 'GitFetchError';
}

/** The git repository a spec names, if it names one. */
export function gitRepositoryOf(spec: any): GitRepository | undefined {
  const r = spec?.repository;
  if (r?.type !== 'git' || typeof r.url !== 'string' || !r.url) return undefined;
  return { url: r.url, ...(typeof r.branch === 'string' && r.branch ? { branch: r.branch } : {}) };
}

/** Host names curl parses as WHATWG does: the pin below names the very host git connects to. */
const PLAIN_HOST = /^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/;

/** A checked URL: what git is given, its protocol, and the `-c` pins of its host (none for a local one). */
export interface CheckedGitUrl {
  url: string;
  protocol: string;
  pins: string[];
}

/**
 * The URL git is given (a local path as file://), its protocol and the address pins of its host; throws
 * GitFetchError when refused. `outbound` judges the host; it is resolved here, once, for the clone.
 */
export async function checkGitUrl(
  raw: string,
  allowLocal: boolean,
  outbound: Outbound,
): Promise<CheckedGitUrl> {
  const local = raw.startsWith('/');
  let u: URL;
  try {
    u = new URL(local ? `file://${raw}` : raw);
  } catch {
    throw new GitFetchError(`spec.repository.url ${JSON.stringify(raw)} is not a URL or an absolute path`);
  }
  const protocol = u.protocol.replace(/:$/, '');
  if (!['https', 'http', 'file'].includes(protocol))
    throw new GitFetchError(
      `spec.repository.url: ${protocol}:// is not fetched (https, http${allowLocal ? ', file' : ''})`,
    );
  if (u.username || u.password)
    throw new GitFetchError(
      'spec.repository.url must not carry credentials (they would be stored in the spec)',
    );
  if (protocol === 'file') {
    if (!allowLocal)
      throw new GitFetchError(
        'local repositories are refused on this server (BERTH_GIT_ALLOW_LOCAL=true allows them)',
      );
    return { url: u.href, protocol, pins: [] };
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!isIP(host) && !PLAIN_HOST.test(host))
    throw new GitFetchError(`spec.repository.url: ${JSON.stringify(u.hostname)} is not a plain host name`);
  let addresses: string[];
  try {
    addresses = await outbound.vet(host);
  } catch (e) {
    if (e instanceof OutboundRefused) throw new GitFetchError(`spec.repository.url: ${e.message}`);
    throw new GitFetchError(`spec.repository.url: cannot resolve ${host}`);
  }
  if (isIP(host)) return { url: u.href, protocol, pins: [] };
  const port = u.port || (protocol === 'https' ? '443' : '80');
  const list = addresses.map((a) => (isIP(a) === 6 ? `[${a}]` : a)).join(',');
  return { url: u.href, protocol, pins: ['-c', `http.curloptResolve=${host}:${port}:${list}`] };
}

/** git's options that keep a clone from running or reading anything but the repository (see the header). */
function inertConfig(protocol: string): string[] {
  const c = [
    'protocol.allow=never',
    `protocol.${protocol}.allow=always`,
    'core.hooksPath=/dev/null',
    'core.symlinks=false',
    'core.fsmonitor=false',
    'submodule.recurse=false',
    'http.followRedirects=false',
    'credential.helper=',
    'transfer.fsckObjects=true',
  ];
  return c.flatMap((x) => ['-c', x]);
}

function sizeOf(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) n += sizeOf(p);
    else n += lstatSync(p).size;
  }
  return n;
}

function git(args: string[], home: string, signal: AbortSignal, watchDir?: string) {
  return new Promise<string>((resolve, reject) => {
    const child = spawn('git', args, {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_TERMINAL_PROMPT: '0',
        GIT_ASKPASS: '/bin/false',
        SSH_ASKPASS: '/bin/false',
        GIT_LFS_SKIP_SMUDGE: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      signal,
    });
    let out = '';
    let err = '';
    let over = false;
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err = (err + d).slice(-ERROR_CHARS);
    });
    const sizer =
      watchDir &&
      setInterval(() => {
        try {
          if (sizeOf(watchDir) > GIT_MAX_BYTES) {
            over = true;
            child.kill('SIGKILL');
          }
        } catch {
          // Not created yet.
        }
      }, SIZE_CHECK_MS);
    child.on('error', (e) => {
      if (sizer) clearInterval(sizer);
      reject(new GitFetchError(signal.aborted ? `git stopped: ${signal.reason ?? 'aborted'}` : e.message));
    });
    child.on('close', (code) => {
      if (sizer) clearInterval(sizer);
      if (over) reject(new GitFetchError(`the repository passes ${GIT_MAX_BYTES} bytes`));
      else if (code === 0) resolve(out);
      else reject(new GitFetchError(err.trim() || `git exited with code ${code}`));
    });
  });
}

/** The checked-out tree as a zip (sorted, fixed dates: the same tree gives the same digest). `.git` is left out. */
function packTree(root: string) {
  const zip = new yazl.ZipFile();
  const walk = (rel: string) => {
    const names = readdirSync(join(root, rel)).sort();
    for (const name of names) {
      if (!rel && name === '.git') continue;
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, r));
      if (st.isDirectory()) walk(r);
      else if (st.isFile())
        zip.addFile(join(root, r), r, { mtime: FIXED_DATE, mode: st.mode & 0o111 ? 0o100755 : 0o100644 });
    }
  };
  walk('');
  zip.end();
  return zip.outputStream.pipe(new PassThrough());
}

/** Clones `repo` into a fresh directory under `workDir`, stores its tree in `workspace`'s code, removes the clone. */
export async function fetchGitSource(
  repo: GitRepository,
  o: {
    code: CodeStore;
    workspace: string;
    workDir: string;
    allowLocal: boolean;
    outbound: Outbound;
    signal: AbortSignal;
  },
): Promise<GitSourceInfo> {
  if (repo.branch !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(repo.branch))
    throw new GitFetchError(`spec.repository.branch ${JSON.stringify(repo.branch)} is not a branch name`);
  const { url, protocol, pins } = await checkGitUrl(repo.url, o.allowLocal, o.outbound);
  const tmp = mkdtempSync(join(o.workDir, 'git-'));
  const dest = join(tmp, 'tree');
  const signal = AbortSignal.any([o.signal, AbortSignal.timeout(GIT_CLONE_TIMEOUT_MS)]);
  try {
    const branch = repo.branch ? ['--branch', repo.branch] : [];
    const cfg = inertConfig(protocol);
    await git(
      [
        ...cfg,
        ...pins,
        'clone',
        '--quiet',
        '--depth',
        '1',
        '--single-branch',
        '--no-recurse-submodules',
        '--template=',
        ...branch,
        '--',
        url,
        dest,
      ],
      tmp,
      signal,
      dest,
    );
    const commit = (await git([...cfg, '-C', dest, 'rev-parse', 'HEAD'], tmp, signal)).trim();
    const stored = await o.code.put(o.workspace, packTree(dest));
    return { ...stored, url: repo.url, ...(repo.branch ? { branch: repo.branch } : {}), commit };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
