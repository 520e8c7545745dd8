import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildFilter, encodeFilter, type Insn, RET_ALLOW, RET_KILL_PROCESS, retErrno } from './seccomp.js';
import { syscallTable } from './syscalls.js';

/** Runs a filter the way the kernel's classic-BPF interpreter would, over a seccomp_data. */
function run(program: Insn[], data: { nr: number; arch: number; args?: number[] }): number {
  const word = (off: number) => {
    if (off === 0) return data.nr;
    if (off === 4) return data.arch;
    const i = (off - 16) / 8;
    return data.args?.[i] ?? 0;
  };
  let a = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const { code, jt, jf, k } = program[pc];
    if (code === 0x20) a = word(k);
    else if (code === 0x06) return k >>> 0;
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x35) pc += a >>> 0 >= k >>> 0 ? jt : jf;
    else if (code === 0x45) pc += (a & k) !== 0 ? jt : jf;
    else throw new Error(`unknown opcode ${code}`);
  }
  throw new Error('fell off the end of the program');
}

const x64 = syscallTable('x64')!;
const prog = buildFilter(x64);
const call = (name: string, args?: number[]) => run(prog, { nr: x64.nr[name], arch: x64.auditArch, args });

test('filter denies escape syscalls with EPERM and lets ordinary ones through', () => {
  assert.equal(call('keyctl'), retErrno(1));
  assert.equal(call('open_by_handle_at'), retErrno(1));
  assert.equal(call('mount'), retErrno(1));
  assert.equal(run(prog, { nr: 0, arch: x64.auditArch }), RET_ALLOW); // read
  assert.equal(run(prog, { nr: 59, arch: x64.auditArch }), RET_ALLOW); // execve
});

test('filter answers ENOSYS for io_uring and clone3 so callers fall back', () => {
  assert.equal(call('io_uring_setup'), retErrno(38));
  assert.equal(call('clone3'), retErrno(38));
});

test('filter inspects flags: new user namespaces are denied, plain clone and unshare allowed', () => {
  assert.equal(call('clone', [0x10000000 | 0x11]), retErrno(1));
  assert.equal(call('clone', [0x01200011]), RET_ALLOW);
  assert.equal(call('unshare', [0x10000000]), retErrno(1));
  assert.equal(call('unshare', [0x00020000]), RET_ALLOW);
  assert.equal(call('ioctl', [1, 0x5412]), retErrno(1));
  assert.equal(call('ioctl', [1, 0x541c]), retErrno(1));
  assert.equal(call('ioctl', [1, 0x5401]), RET_ALLOW); // TCGETS
});

test('filter kills a foreign architecture and refuses the x32 ABI', () => {
  assert.equal(run(prog, { nr: 0, arch: 0x40000003 }), RET_KILL_PROCESS);
  assert.equal(run(prog, { nr: 0x40000000 + 1, arch: x64.auditArch }), retErrno(38));
});

test('encoded filter is eight bytes per instruction with every jump inside the program', () => {
  const buf = encodeFilter(prog);
  assert.equal(buf.length, prog.length * 8);
  prog.forEach((x, i) => {
    if (x.code === 0x06 || x.code === 0x20) return; // not a jump
    assert.ok(i + 1 + x.jt < prog.length && i + 1 + x.jf < prog.length, `jump out of range at ${i}`);
  });
  const arm = buildFilter(syscallTable('arm64')!);
  assert.equal(run(arm, { nr: 219, arch: 0xc00000b7 }), retErrno(1)); // keyctl on aarch64
});

test('filter refuses signals and pidfds aimed at pid 1, the daemon (pid 2) or everyone; others pass', () => {
  for (const name of ['kill', 'tkill', 'tgkill', 'rt_sigqueueinfo', 'rt_tgsigqueueinfo']) {
    assert.equal(call(name, [1, 9]), retErrno(1), `${name} pid 1`);
    assert.equal(call(name, [2, 9]), retErrno(1), `${name} pid 2`);
    assert.equal(call(name, [0xffffffff, 9]), retErrno(1), `${name} -1`);
    assert.equal(call(name, [3, 9]), RET_ALLOW, `${name} a user process`);
  }
  assert.equal(call('kill', [0xfffffff0, 15]), RET_ALLOW, 'a user process group');
  assert.equal(call('pidfd_open', [2, 0]), retErrno(1));
  assert.equal(call('pidfd_open', [1, 0]), retErrno(1));
  assert.equal(call('pidfd_open', [40, 0]), RET_ALLOW);
  assert.equal(call('pidfd_send_signal', [5, 9]), retErrno(38), 'its target cannot be checked: ENOSYS');
});
