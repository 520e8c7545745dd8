import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkSandboxId, defaultCpuShares, type SandboxSpec, specHash } from './driver.js';
import { FakeDriver } from './fake.js';
import { checkSpec } from './linux/spec-check.js';

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({
  memoryMb: 2048,
  pidsMax: 256,
  cpuShares: defaultCpuShares(2048),
  diskMb: 1024,
  envs: { A: '1', B: '2' },
  image: 'base',
  volumes: [],
  ...over,
});

test('spec hash ignores key order and changes with any value', () => {
  const a = spec();
  const b = {
    volumes: [],
    image: 'base',
    envs: { B: '2', A: '1' },
    diskMb: 1024,
    cpuShares: 1024,
    pidsMax: 256,
    memoryMb: 2048,
  };
  assert.equal(specHash(a), specHash(b));
  assert.notEqual(specHash(a), specHash(spec({ envs: { A: '1', B: '3' } })));
  assert.notEqual(specHash(a), specHash(spec({ memoryMb: 4096 })));
  assert.equal(defaultCpuShares(2048), 1024);
  assert.equal(defaultCpuShares(1), 2);
});

test('sandbox ids are short plain names', () => {
  checkSandboxId('ws1.my-sandbox_2');
  for (const bad of ['', '../x', 'a/b', 'x'.repeat(64), '.hidden', 'a..b']) {
    assert.throws(() => checkSandboxId(bad), /invalid sandbox id/);
  }
});

test('the runtime refuses specs it cannot honour', () => {
  checkSpec(spec({ volumes: [{ hostPath: '/srv/v', mountPath: '/workspace/data', readOnly: false }] }));
  const bad: Array<Partial<SandboxSpec>> = [
    { memoryMb: 8 },
    { diskMb: 0 },
    { cpuShares: 1 },
    { envs: { 'A=B': 'x' } },
    { envs: { A: 'nul\0byte' } },
    { volumes: [{ hostPath: 'relative', mountPath: '/data', readOnly: true }] },
    { volumes: [{ hostPath: '/srv/v', mountPath: '/etc', readOnly: true }] },
    { volumes: [{ hostPath: '/srv/v', mountPath: '/usr/local', readOnly: true }] },
    { volumes: [{ hostPath: '/srv/v', mountPath: '/run/berth', readOnly: true }] },
    { volumes: [{ hostPath: '/srv/v', mountPath: '/', readOnly: true }] },
  ];
  for (const b of bad) assert.throws(() => checkSpec(spec(b)), /invalid sandbox spec/, JSON.stringify(b));
});

test('the fake driver keeps the contract: idempotent ensure, states, idempotent remove', async () => {
  const d = new FakeDriver(() => new Date('2026-01-01T00:00:00Z'));
  const a = await d.ensure('s1', spec());
  assert.equal((await d.ensure('s1', spec())).pid, a.pid);
  assert.equal(d.creations, 1);
  await d.freeze('s1');
  assert.equal((await d.inspect('s1'))?.state, 'frozen');
  await d.thaw('s1');
  d.kill('s1');
  assert.equal((await d.list())[0].state, 'dead');
  assert.notEqual((await d.ensure('s1', spec())).pid, a.pid, 'a dead sandbox is recreated');
  await d.remove('s1');
  await d.remove('s1');
  assert.equal(await d.inspect('s1'), undefined);
  await assert.rejects(d.freeze('s1'), /not found/);
});
