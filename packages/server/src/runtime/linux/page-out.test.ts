// Per-process page-out (needs root): the call reaches a process of the named memory group, and never one outside
// it (a pid read from a sandbox's group may have been reused by a host process by the time the helper runs).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { canPageOut, pageOut } from './page-out.js';

const child = spawn('sleep', ['30'], { stdio: 'ignore' });
after(() => child.kill());

const memoryGroup = (pid: number) =>
  /^\d+:memory:(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1] ?? '';

test('a process in the named memory group is paged out; one outside it is left alone', async () => {
  assert.ok(canPageOut(), 'perl is there to make the call');
  const pid = child.pid!;
  const group = memoryGroup(pid);
  assert.ok(group, 'the host has a v1 memory hierarchy');
  assert.ok((await pageOut(group, [pid])) > 0, 'the kernel was advised about its mappings');
  assert.equal(await pageOut(`${group}/not-this-one`, [pid]), 0, 'a pid outside the group is skipped');
});
