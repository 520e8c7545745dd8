// An agent from spec.repository (git) on real sandboxes: the branch is cloned, built like an upload and served;
// a branch that does not exist ends FAILED with git's own message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const TEMPLATE = join(import.meta.dirname, '../../../../templates/agent-python');
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: cwd },
  })
    .toString()
    .trim();

describe('agents from a git repository', () => {
  let s: SandboxServer;
  let root: string;
  let bare: string;
  const put = (branch: string) =>
    s.api('/agents/git-agent', {
      method: 'PUT',
      json: {
        metadata: { name: 'git-agent' },
        spec: { repository: { type: 'git', url: bare, branch }, runtime: { memory: 256 } },
      },
    });
  async function settle(): Promise<any> {
    for (let i = 0; i < 1200; i++) {
      const o = await (await s.api('/agents/git-agent')).json();
      if (o.status === 'DEPLOYED' || o.status === 'FAILED') return o;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail('neither DEPLOYED nor FAILED');
  }
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'berth-git-agent-'));
    const src = join(root, 'src');
    cpSync(TEMPLATE, src, { recursive: true });
    git(src, 'init', '-q', '-b', 'main');
    git(src, 'add', '-A');
    git(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'agent');
    bare = join(root, 'agent.git');
    git(root, 'clone', '-q', '--bare', src, bare);
    s = await startSandboxServer({ BERTH_GIT_ALLOW_LOCAL: 'true' });
  });
  after(async () => {
    await s.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('clones the branch, builds it and answers through the gateway', async () => {
    assert.equal((await put('main')).status, 200);
    const o = await settle();
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events.at(-1)));
    assert.equal(o.source.repository.commit, git(bare, 'rev-parse', 'main'));
    assert.ok(o.events.some((e: any) => /^cloning /.test(e.message)));
    const res = await s.run(`${s.url}/run/default/agents/git-agent`, {
      method: 'POST',
      json: { inputs: 'hi' },
    });
    assert.equal((await res.json()).output, 'HI');
  });

  it("a branch that does not exist ends FAILED with git's message", async () => {
    assert.equal((await put('no-such-branch')).status, 200);
    const o = await settle();
    assert.equal(o.status, 'FAILED', JSON.stringify(o.events.slice(-4)));
    assert.match(o.events.at(-1).message, /git clone of .* failed: .*no-such-branch/s);
  });
});
