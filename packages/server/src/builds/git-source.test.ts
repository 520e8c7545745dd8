// Cloning spec.repository into the code store: the branch's tree packed like an upload (same tree, same digest),
// .git left out, symlinks as plain files; local sources refused unless allowed, hosts judged by the outbound rules
// and git pinned to the vetted address (a name is never resolved by git itself); git's error kept.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  existsSync,
  lstatSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Outbound } from '../outbound/index.js';
import { type GitHttp, startGitHttp } from '../test-support/git-http.js';
import { CodeStore } from './code-store.js';
import { checkGitUrl, fetchGitSource, GitFetchError } from './git-source.js';
import { extractZip } from './zip-extract.js';

const run = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: cwd },
  })
    .toString()
    .trim();

const HOST = '192.0.2.2'; // this host's LAN address, as the injected interface list says
const interfaces = () => ['127.0.0.1', '::1', HOST];
/** Names the tests resolve: a public one, one on this host, and one on loopback (each the test's own answer). */
const lookup = async (h: string) => {
  const table: Record<string, string[]> = {
    'example.com': ['93.184.215.14'],
    'host.example': [HOST],
    'repo.test': ['127.0.0.1'],
  };
  if (table[h]) return table[h];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: 'ENOTFOUND' });
};
const strict = new Outbound({ allowCidrs: [], interfaces, lookup });
/** Loopback opened, as a server with BERTH_OUTBOUND_ALLOW_CIDRS=127.0.0.0/8 has it. */
const loopback = new Outbound({ allowCidrs: ['127.0.0.0/8'], interfaces, lookup });

describe('git sources', () => {
  let root: string;
  let bare: string;
  let code: CodeStore;
  let work: string;
  const signal = new AbortController().signal;
  const outbound = strict;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-git-'));
    const src = join(root, 'src');
    bare = join(root, 'repo.git');
    mkdirSync(src);
    run(src, 'init', '-q', '-b', 'main');
    writeFileSync(join(src, 'main.py'), 'print("main")\n');
    symlinkSync('/etc/passwd', join(src, 'link'));
    run(src, 'add', '-A');
    run(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'one');
    run(src, 'checkout', '-q', '-b', 'canary');
    writeFileSync(join(src, 'main.py'), 'print("canary")\n');
    run(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qam', 'two');
    run(src, 'checkout', '-q', 'main');
    run(root, 'clone', '-q', '--bare', src, bare);
    code = new CodeStore(join(root, 'data'));
    work = join(root, 'work');
    mkdirSync(work);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('clones the branch into the code store; the same tree twice is one digest', async () => {
    const got = await fetchGitSource(
      { url: bare },
      { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
    );
    assert.match(got.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(got.commit, run(bare, 'rev-parse', 'main'));
    const out = join(root, 'out');
    await extractZip(code.pathOf('default', got.digest), out);
    assert.equal(readFileSync(join(out, 'main.py'), 'utf8'), 'print("main")\n');
    assert.equal(existsSync(join(out, '.git')), false, '.git is not packed');
    assert.ok(lstatSync(join(out, 'link')).isFile(), 'a symlink arrives as a plain file');
    assert.equal(readFileSync(join(out, 'link'), 'utf8'), '/etc/passwd');

    const again = await fetchGitSource(
      { url: `file://${bare}` },
      { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
    );
    assert.equal(again.digest, got.digest);
    assert.equal(again.alreadyPresent, true);

    const canary = await fetchGitSource(
      { url: bare, branch: 'canary' },
      { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
    );
    assert.notEqual(canary.digest, got.digest);
    assert.equal(canary.commit, run(bare, 'rev-parse', 'canary'));
  });

  it("a missing repository or branch fails with git's own message", async () => {
    await assert.rejects(
      fetchGitSource(
        { url: bare, branch: 'nope' },
        { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
      ),
      (e: Error) => e instanceof GitFetchError && /nope/.test(e.message),
    );
    await assert.rejects(
      fetchGitSource(
        { url: join(root, 'absent.git') },
        { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
      ),
      (e: Error) => e instanceof GitFetchError && /does not appear to be a git repository/.test(e.message),
    );
    await assert.rejects(
      fetchGitSource(
        { url: bare, branch: '--upload-pack=touch /tmp/x' },
        { code, workspace: 'default', workDir: work, allowLocal: true, outbound, signal },
      ),
      /not a branch name/,
    );
  });

  it('local paths, closed hosts, other protocols and URLs with credentials are refused by default', async () => {
    await assert.rejects(checkGitUrl(bare, false, strict), /local repositories are refused/);
    await assert.rejects(checkGitUrl(`file://${bare}`, false, strict), /local repositories are refused/);
    await assert.rejects(checkGitUrl('http://127.0.0.1:9418/x.git', false, strict), /loopback/);
    await assert.rejects(checkGitUrl('https://10.1.2.3/x.git', false, strict), /10\.0\.0\.0\/8/);
    // An IPv4-mapped IPv6 literal and a benchmark-range address are closed too (one range list with callbacks).
    await assert.rejects(checkGitUrl('http://[::ffff:127.0.0.1]/x.git', false, strict), /loopback/);
    await assert.rejects(checkGitUrl('https://198.18.0.1/x.git', false, strict), /benchmarking/);
    await assert.rejects(checkGitUrl('https://203.0.113.7/x.git', false, strict), /documentation/);
    await assert.rejects(checkGitUrl(`https://${HOST}/x.git`, true, strict), /never opened/);
    await assert.rejects(checkGitUrl('https://host.example/x.git', true, loopback), /never opened/);
    await assert.rejects(checkGitUrl('http://localhost:9418/x.git', true, strict), /loopback/);
    await assert.rejects(checkGitUrl('ext::sh -c touch% /tmp/pwned', true, strict), /not fetched|not a URL/);
    await assert.rejects(checkGitUrl('ssh://git@example.com/x.git', true, strict), /not fetched/);
    await assert.rejects(checkGitUrl('git://example.com/x.git', true, strict), /not fetched/);
    await assert.rejects(checkGitUrl('https://user:tok@example.com/x.git', true, strict), /credentials/);
    // BERTH_GIT_ALLOW_LOCAL opens local paths only; loopback opens with the outbound setting.
    await assert.rejects(checkGitUrl('http://127.0.0.1:9418/x.git', true, strict), /loopback/);
    assert.equal((await checkGitUrl('http://127.0.0.1:9418/x.git', false, loopback)).protocol, 'http');
    assert.deepEqual(await checkGitUrl('https://93.184.215.14/x.git', false, strict), {
      url: 'https://93.184.215.14/x.git',
      protocol: 'https',
      pins: [],
    });
    assert.deepEqual((await checkGitUrl('https://example.com/x.git', false, strict)).pins, [
      '-c',
      'http.curloptResolve=example.com:443:93.184.215.14',
    ]);
  });

  describe('over HTTP', () => {
    let server: GitHttp;
    let port: number;
    before(async () => {
      server = await startGitHttp(root);
      port = server.port;
    });
    after(() => server.close());

    it('git is pinned to the vetted address: a name only Berth can resolve is cloned from it', async () => {
      const got = await fetchGitSource(
        { url: `http://repo.test:${port}/repo.git` },
        { code, workspace: 'default', workDir: work, allowLocal: false, outbound: loopback, signal },
      );
      assert.equal(got.commit, run(bare, 'rev-parse', 'main'));
      assert.ok(server.requests() > 0);
    });

    it('a name resolving to loopback (a rebinding answer) is refused and the server hears nothing', async () => {
      const heard = server.requests();
      await assert.rejects(
        fetchGitSource(
          { url: `http://repo.test:${port}/repo.git` },
          { code, workspace: 'default', workDir: work, allowLocal: false, outbound: strict, signal },
        ),
        (e: Error) => e instanceof GitFetchError && /repo\.test resolves to 127\.0\.0\.1/.test(e.message),
      );
      assert.equal(server.requests(), heard);
    });
  });
});
