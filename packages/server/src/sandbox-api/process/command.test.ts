import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { planSpawn, resolveProgram } from './command.js';

describe('planSpawn', () => {
  test('a plain word list runs directly', () => {
    assert.deepEqual(planSpawn('ls -la /tmp'), { file: 'ls', args: ['-la', '/tmp'], shell: false });
    assert.deepEqual(planSpawn('  python3   -m http.server 8000 '), {
      file: 'python3',
      args: ['-m', 'http.server', '8000'],
      shell: false,
    });
  });

  test('anything a shell would interpret goes through /bin/sh -c', () => {
    for (const cmd of [
      'echo $HOME',
      'ls | wc -l',
      'a && b',
      'echo "quoted words"',
      "echo 'x'",
      'cat < in',
      'echo hi > out',
      'ls *.ts',
      'cd /tmp',
      'export A=1',
      'A=1 env',
      'echo ~',
      'sleep 1 &',
      'echo a\nb',
    ]) {
      assert.deepEqual(planSpawn(cmd), { file: '/bin/sh', args: ['-c', cmd], shell: true }, cmd);
    }
  });
});

describe('resolveProgram', () => {
  test('finds a program on PATH as execvp would, or nothing', () => {
    assert.equal(resolveProgram('sh', '/nonexistent:/bin', '/'), '/bin/sh');
    assert.equal(resolveProgram('no-such-program-xyz', '/bin:/usr/bin', '/'), undefined);
    assert.equal(resolveProgram('./x', '/bin', '/tmp'), '/tmp/x');
  });
});
