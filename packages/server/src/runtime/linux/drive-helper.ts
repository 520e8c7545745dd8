// The tiny C program that puts a drive into a running sandbox's mount namespace (decision 031). Node cannot call
// open_tree, mount_setattr, setns or move_mount, and a `mount` binary run inside the sandbox's root would be the
// sandbox's own program; so the server compiles this once (cached by the source's hash under <dataDir>/helpers)
// and runs it as root. It clones the drive directory into a detached mount, applies the sandbox's user namespace
// as an id map (files stored as uid 0 show as root to every sandbox), read-only when asked, then enters the
// sandbox's mount namespace, confines itself to the sandbox's root (chroot: every path and symlink resolves as
// the sandbox sees it, never on the host) and attaches the mount at mountPath.
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec.js';

const SOURCE = String.raw`
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>
#include <linux/openat2.h>

static void die(const char *what) { fprintf(stderr, "%s: %s\n", what, strerror(errno)); exit(1); }

/* An empty directory on a read-only file system (the image's /mnt) gets a small tmpfs so a mount point can be
   made in it; a directory with content is never hidden. */
static int empty_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return 0;
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n == 0;
}

/* mkdir -p as the sandbox's own uid, so a directory is made only where the sandbox could make it itself. */
static void make_path(char *path, unsigned uid) {
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p) continue;
    char c = *p;
    *p = 0;
    setfsuid(uid); setfsgid(uid);
    int r = mkdir(path, 0755);
    int err = errno;
    setfsuid(0); setfsgid(0);
    if (r && err == EROFS) {
      char parent[4096];
      snprintf(parent, sizeof parent, "%s", path);
      char *slash = strrchr(parent, '/');
      if (slash == parent) slash[1] = 0; else *slash = 0;
      char opts[64];
      snprintf(opts, sizeof opts, "mode=0755,uid=%u,gid=%u,size=1m", uid, uid);
      if (strcmp(parent, "/") && empty_dir(parent) && !mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, opts)) {
        setfsuid(uid); setfsgid(uid);
        r = mkdir(path, 0755);
        err = errno;
        setfsuid(0); setfsgid(0);
      }
    }
    if (r && err == EROFS) {
      fprintf(stderr, "%s is on a read-only file system: mount under a writable directory (/home/user, /tmp) or an empty one\n", path);
      exit(1);
    }
    if (r && err != EEXIST) { errno = err; die("mkdir"); }
    if (!c) break;
    *p = c;
  }
}

int main(int argc, char **argv) {
  char p[64];
  int mounting = argc == 8 && !strcmp(argv[1], "mount");
  if (!mounting && !(argc == 4 && !strcmp(argv[1], "umount"))) {
    fprintf(stderr, "usage: mount <pid> <mountPath> <driveRoot> <subPath> <ro 0|1> <uid> | umount <pid> <mountPath>\n");
    return 2;
  }
  const char *pid = argv[2];
  int tree = -1;
  if (mounting) {
    /* The directory is looked up beneath the drive's root, on its file system only: a symlink a sandbox left
       in the drive cannot lead the server anywhere else on the host. */
    int droot = open(argv[4], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (droot < 0) die("drive");
    struct open_how how = {0};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
    int dir = syscall(SYS_openat2, droot, argv[5][0] ? argv[5] : ".", &how, sizeof how);
    if (dir < 0) die("drivePath");
    tree = syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0) die("open_tree");
    snprintf(p, sizeof p, "/proc/%s/ns/user", pid);
    int uns = open(p, O_RDONLY | O_CLOEXEC);
    if (uns < 0) die("user namespace");
    struct mount_attr a = {0};
    a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (argv[6][0] == '1' ? MOUNT_ATTR_RDONLY : 0);
    a.userns_fd = uns;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof a)) die("mount_setattr");
  }
  snprintf(p, sizeof p, "/proc/%s/ns/mnt", pid);
  int mns = open(p, O_RDONLY | O_CLOEXEC);
  if (mns < 0) die("mount namespace");
  snprintf(p, sizeof p, "/proc/%s/root", pid);
  int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) die("root");
  if (setns(mns, CLONE_NEWNS)) die("setns");
  if (fchdir(root) || chroot(".") || chdir("/")) die("chroot");
  char target[4096];
  snprintf(target, sizeof target, "%s", argv[3]);
  if (mounting) {
    make_path(target, (unsigned)strtoul(argv[7], 0, 10));
    if (syscall(SYS_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)) die("move_mount");
  } else if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW)) die("umount");
  return 0;
}
`;

/** Per data directory (tests run several servers in one process). */
const compiled = new Map<string, Promise<string>>();

/** The helper's path, compiled on first use (atomically: a half-written binary is never run). */
export function driveHelper(dataDir: string): Promise<string> {
  const known = compiled.get(dataDir);
  if (known) return known;
  const made = (async () => {
    const dir = join(dataDir, 'helpers');
    const bin = join(dir, `drive-mount-${createHash('sha256').update(SOURCE).digest('hex').slice(0, 12)}`);
    if (existsSync(bin)) return bin;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const src = `${bin}.c`;
    writeFileSync(src, SOURCE);
    try {
      await run('cc', ['-O2', '-Wall', '-o', `${bin}.tmp`, src]);
    } catch (e) {
      throw new Error(
        `the drive mount helper could not be compiled (install gcc and libc6-dev): ${(e as Error).message}`,
      );
    }
    chmodSync(`${bin}.tmp`, 0o700);
    renameSync(`${bin}.tmp`, bin);
    return bin;
  })();
  compiled.set(dataDir, made);
  made.catch(() => compiled.delete(dataDir));
  return made;
}
