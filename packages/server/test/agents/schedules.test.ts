// Schedule triggers on an agent, on a real replica: each firing POSTs the trigger's tasks to the agent in order,
// and a firing due while the previous one of the same schedule still runs is skipped (never two at once).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { berth } from '../berth-cli.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The Python template, also keeping every input it received and its peak of requests at once (GET /seen). */
function recordingAgent(dir: string) {
  cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
  const main = readFileSync(join(dir, 'main.py'), 'utf8');
  const patched = main
    .replace(
      'threads_lock = threading.Lock()',
      'threads_lock = threading.Lock()\nSEEN = []\nSTATE = {"now": 0, "peak": 0}\n',
    )
    .replace(
      '        if self.path == "/health":',
      '        if self.path == "/seen":\n            self.send_json(200, {"seen": SEEN, "peak": STATE["peak"]})\n        elif self.path == "/health":',
    )
    .replace(
      '        self.send_json(200, answer(inputs, history))',
      [
        '        with threads_lock:',
        '            SEEN.append(inputs)',
        '            STATE["now"] += 1',
        '            STATE["peak"] = max(STATE["peak"], STATE["now"])',
        '        if inputs == "slow":',
        '            import time',
        '            time.sleep(2.5)',
        '        with threads_lock:',
        '            STATE["now"] -= 1',
        '        self.send_json(200, answer(inputs, history))',
      ].join('\n'),
    );
  assert.equal(patched.match(/SEEN/g)?.length, 3, 'the template still has the lines this test patches');
  writeFileSync(join(dir, 'main.py'), patched);
}

describe('agent schedule triggers', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-agent-cron-'));
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  const seen = async (agent: string) =>
    (await (await s.run(`${s.url}/run/default/agents/${agent}/seen`)).json()) as {
      seen: string[];
      peak: number;
    };

  async function deployWith(agent: string, trigger: unknown) {
    const dir = join(work, agent);
    recordingAgent(dir);
    writeFileSync(join(dir, 'berth.toml'), `type = "agent"\nname = "${agent}"\n[runtime]\nmemory = 256\n`);
    const r = await berth(s, ['deploy', dir]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const cur = await (await s.api(`/agents/${agent}`)).json();
    const put = await s.api(`/agents/${agent}`, {
      method: 'PUT',
      json: { metadata: { name: agent }, spec: { ...cur.spec, triggers: [trigger] } },
    });
    assert.equal(put.status, 200, await put.text());
  }

  it('refuses a schedule that is not a cron expression', async () => {
    const res = await s.api('/agents/bad-cron', {
      method: 'PUT',
      json: {
        metadata: { name: 'bad-cron' },
        spec: { triggers: [{ type: 'schedule', configuration: { schedule: 'every minute' } }] },
      },
    });
    assert.equal(res.status, 422);
  });

  it('each firing sends the trigger tasks to the agent in order', async () => {
    await deployWith('cron-agent', {
      id: 'tick',
      type: 'schedule',
      configuration: { schedule: '*/2 * * * * *', tasks: [{ inputs: 'first' }, { inputs: 'second' }] },
    });
    let got: string[] = [];
    for (let i = 0; i < 200 && got.length < 4; i++) {
      got = (await seen('cron-agent')).seen;
      await sleep(100);
    }
    assert.deepEqual(got.slice(0, 4), ['first', 'second', 'first', 'second'], 'two firings, tasks in order');
  });

  it('skips a firing while the previous one of the same schedule still runs', async () => {
    await deployWith('slow-agent', {
      id: 'busy',
      type: 'schedule',
      configuration: { schedule: '* * * * * *', tasks: [{ inputs: 'slow' }] },
    });
    for (let i = 0; i < 200 && (await seen('slow-agent')).seen.length === 0; i++) await sleep(100);
    await sleep(6000);
    const r = await seen('slow-agent');
    // Every second for 6 s, each run taking 2.5 s: overlapping firings would have been 6 or more.
    assert.equal(r.peak, 1, 'never two firings at once');
    assert.ok(r.seen.length <= 4, `firings skipped while one ran (saw ${r.seen.length})`);
  });
});
