// Cloning spec.repository into the code store: the branch's tree packed like an upload (same tree, same digest),
// .git left out, symlinks as plain files; local and private sources refused unless allowed; git's error kept.
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

describe('git sources', () => {
  let root: string;
  let bare: string;
  let code: CodeStore;
  let work: string;
  const signal = new AbortController().signal;
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
      { code, workspace: 'default', workDir: work, allowLocal: true, signal },
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
      { code, workspace: 'default', workDir: work, allowLocal: true, signal },
    );
    assert.equal(again.digest, got.digest);
    assert.equal(again.alreadyPresent, true);

    const canary = await fetchGitSource(
      { url: bare, branch: 'canary' },
      { code, workspace: 'default', workDir: work, allowLocal: true, signal },
    );
    assert.notEqual(canary.digest, got.digest);
    assert.equal(canary.commit, run(bare, 'rev-parse', 'canary'));
  });

  it("a missing repository or branch fails with git's own message", async () => {
    await assert.rejects(
      fetchGitSource(
        { url: bare, branch: 'nope' },
        { code, workspace: 'default', workDir: work, allowLocal: true, signal },
      ),
      (e: Error) => e instanceof GitFetchError && /nope/.test(e.message),
    );
    await assert.rejects(
      fetchGitSource(
        { url: join(root, 'absent.git') },
        { code, workspace: 'default', workDir: work, allowLocal: true, signal },
      ),
      (e: Error) => e instanceof GitFetchError && /does not appear to be a git repository/.test(e.message),
    );
    await assert.rejects(
      fetchGitSource(
        { url: bare, branch: '--upload-pack=touch /tmp/x' },
        { code, workspace: 'default', workDir: work, allowLocal: true, signal },
      ),
      /not a branch name/,
    );
  });

  it('local paths, private hosts, other protocols and URLs with credentials are refused by default', async () => {
    await assert.rejects(checkGitUrl(bare, false), /local repositories are refused/);
    await assert.rejects(checkGitUrl(`file://${bare}`, false), /local repositories are refused/);
    await assert.rejects(checkGitUrl('http://127.0.0.1:9418/x.git', false), /loopback or private/);
    await assert.rejects(checkGitUrl('git://10.1.2.3/x.git', false), /loopback or private/);
    // An IPv4-mapped IPv6 literal and a benchmark-range address are private too (one range list with callbacks).
    await assert.rejects(checkGitUrl('http://[::ffff:127.0.0.1]/x.git', false), /loopback or private/);
    await assert.rejects(checkGitUrl('https://198.18.0.1/x.git', false), /loopback or private/);
    await assert.rejects(checkGitUrl('ext::sh -c touch% /tmp/pwned', true), /not fetched|not a URL/);
    await assert.rejects(checkGitUrl('ssh://git@example.com/x.git', true), /not fetched/);
    await assert.rejects(checkGitUrl('https://user:tok@example.com/x.git', true), /credentials/);
    assert.equal((await checkGitUrl('http://127.0.0.1:9418/x.git', true)).protocol, 'http');
    assert.equal((await checkGitUrl('https://203.0.113.7/x.git', false)).protocol, 'https');
  });
});
