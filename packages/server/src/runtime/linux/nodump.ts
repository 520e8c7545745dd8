// An execute-only copy of a program's ELF loader, so the sandbox's init and API daemon run non-dumpable.
// Node has no prctl(PR_SET_DUMPABLE); the kernel makes a process non-dumpable by itself when it execs a file it
// may not read, and then also ties its memory to the host's user namespace: nothing inside the sandbox (no
// capabilities there anyway) may ptrace it, read /proc/<pid>/mem, fd or environ, process_vm_readv it or
// pidfd_getfd from it. Running `ld.so /usr/bin/node ...` with such a loader copy does exactly that, and the
// programs it starts become dumpable again at their own exec (docs/decisions/015-sandbox-containment.md).
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readlinkSync,
  readSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { isAbsolute, join, posix } from 'node:path';

/** Host directory of the loader copies (root 0711; each copy 0111, root-owned). */
export const NODUMP_DIR = '/run/berth/bin';
const PT_INTERP = 3;
/** An ELF header and its program headers fit in the first pages of any real binary. */
const HEADER_BYTES = 64 * 1024;
/** Symlink hops followed inside an image root (a loop must end). */
const MAX_HOPS = 16;

/** The PT_INTERP path of a 64-bit little-endian ELF file, or undefined (static binary, script, other ELF). */
export function elfInterpreter(file: string): string | undefined {
  const buf = Buffer.alloc(HEADER_BYTES);
  const fd = openSync(file, 'r');
  let n: number;
  try {
    n = readSync(fd, buf, 0, buf.length, 0);
  } finally {
    closeSync(fd);
  }
  if (n < 64 || buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) return undefined;
  const phoff = Number(buf.readBigUInt64LE(32));
  const phentsize = buf.readUInt16LE(54);
  const phnum = buf.readUInt16LE(56);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 56 > n) return undefined;
    if (buf.readUInt32LE(at) !== PT_INTERP) continue;
    const off = Number(buf.readBigUInt64LE(at + 8));
    const size = Number(buf.readBigUInt64LE(at + 32));
    if (off + size > n) return undefined;
    return buf.toString('latin1', off, off + size).replace(/\0.*$/s, '');
  }
  return undefined;
}

/** Resolves `path` as seen from inside `root` ('/' is the host), following symlinks within that root. */
function resolveIn(root: string, path: string): string {
  let p = path;
  for (let hop = 0; hop < MAX_HOPS; hop++) {
    const parts = p.split('/').filter(Boolean);
    let cur = '/';
    let changed = false;
    for (let i = 0; i < parts.length; i++) {
      const next = posix.join(cur, parts[i]);
      let target: string | undefined;
      try {
        target = readlinkSync(join(root, next));
      } catch {
        target = undefined; // not a link (or absent: the stat below reports it)
      }
      if (target === undefined) {
        cur = next;
        continue;
      }
      const rest = parts.slice(i + 1).join('/');
      p = posix.join(isAbsolute(target) ? target : posix.join(cur, target), rest);
      changed = true;
      break;
    }
    if (!changed) return join(root, cur);
  }
  throw new Error(`too many symlinks resolving ${path} in ${root}`);
}

/**
 * Copies the loader that `program` (a path inside `root`) names into NODUMP_DIR as an execute-only file and
 * returns its host path, or undefined for a program without one (static, or not ELF). The name is a hash of
 * the loader's bytes, so images with different loaders never share a copy and a running sandbox keeps its own.
 */
export function noDumpLoader(root: string, program: string): string | undefined {
  const key = `${root}\0${program}`;
  const known = made.get(key);
  if (known !== undefined && (known === '' || existsSync(known))) return known || undefined;
  const copy = makeCopy(root, program);
  made.set(key, copy ?? '');
  return copy;
}

/** Copies made by this process, by image root and program ('' = the program has no loader): one start each. */
const made = new Map<string, string>();

function makeCopy(root: string, program: string): string | undefined {
  const interp = elfInterpreter(resolveIn(root, program));
  if (!interp) return undefined;
  const bytes = readFileSync(resolveIn(root, interp));
  const target = join(NODUMP_DIR, `${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.so`);
  try {
    if ((statSync(target).mode & 0o777) === 0o111) return target;
  } catch {
    // not there yet
  }
  mkdirSync(NODUMP_DIR, { recursive: true });
  chmodSync(NODUMP_DIR, 0o711); // whatever the umask: every sandbox uid must reach its loader
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  chmodSync(tmp, 0o111);
  renameSync(tmp, target);
  return target;
}
