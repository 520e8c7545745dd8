// The tiny C program that puts a drive into a running sandbox's mount namespace (decision 031). Node cannot call
// open_tree, mount_setattr, setns or move_mount, and a `mount` binary run inside the sandbox's root would be the
// sandbox's own program; so the server compiles this once (cached by the source's hash under /run/berth/helpers, shared by every data dir of the machine)
// and runs it as root. It clones the drive directory into a detached mount, applies the sandbox's user namespace
// as an id map (files stored as uid 0 show as root to every sandbox), read-only when asked, then enters the
// sandbox's mount namespace, confines itself to the sandbox's root (chroot: every path and symlink resolves as
// the sandbox sees it, never on the host) and attaches the mount at mountPath.
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec.js';
import { RUN_DIR } from './host.js';

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
#include <sys/wait.h>
#include <signal.h>
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

/* With the sandbox's own uid as the file system uid, so a directory is made only where the sandbox could make it. */
static int mkdir_as(const char *path, unsigned uid) {
  setfsuid(uid); setfsgid(uid);
  int r = mkdir(path, 0755);
  int err = errno;
  setfsuid(0); setfsgid(0);
  errno = err;
  return r;
}

/* The parent directory of path (which has a slash past its first character or is top-level). */
static void parent_of(const char *path, char *parent, size_t size) {
  snprintf(parent, size, "%s", path);
  char *slash = strrchr(parent, '/');
  if (slash == parent) slash[1] = 0; else *slash = 0;
}

/* Whether dir lies on the sandbox's root file system itself (bubblewrap's tmpfs, read-only), not on a bound one. */
static int on_root_fs(const char *dir) {
  struct stat a, b;
  return !stat(dir, &a) && !stat("/", &b) && a.st_dev == b.st_dev;
}

/* mkdir -p as the sandbox's own uid. fresh: a sandbox no program of the user's has run in yet (its volumes are
   being given at create), where a mount point may be made in the read-only root (/data): the root's read-only
   flag is lifted for that mkdir alone and set again. Otherwise an empty directory on a read-only file system (the
   image's /mnt) gets a small tmpfs so a mount point can be made in it; a directory with content is never hidden. */
static void make_path(char *path, unsigned uid, int fresh) {
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p) continue;
    char c = *p;
    *p = 0;
    int r = mkdir_as(path, uid);
    int err = errno;
    char parent[4096];
    parent_of(path, parent, sizeof parent);
    if (r && err == EROFS && fresh && on_root_fs(parent)) {
      struct mount_attr rw = {0}, ro = {0};
      rw.attr_clr = MOUNT_ATTR_RDONLY;
      ro.attr_set = MOUNT_ATTR_RDONLY;
      if (syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &rw, sizeof rw)) die("root read-write");
      r = mkdir_as(path, uid);
      err = errno;
      if (syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ro, sizeof ro)) die("root read-only");
    } else if (r && err == EROFS) {
      char opts[64];
      snprintf(opts, sizeof opts, "mode=0755,uid=%u,gid=%u,size=1m", uid, uid);
      if (strcmp(parent, "/") && empty_dir(parent) && !mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, opts)) {
        r = mkdir_as(path, uid);
        err = errno;
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

/* A user namespace mapping uid and gid 0 to the sandbox's host uid: the id map of every volume and drive mount, so
   files are stored as 0 on disk whichever sandbox (and whichever image user inside) writes them, and show as the
   sandbox's own user in each. A child made with CLONE_NEWUSER holds it while its maps are written and it is
   opened; the child then exits (the open descriptor keeps the namespace). */
static int idmap_userns(unsigned uid) {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC)) die("pipe");
  pid_t child = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (child < 0) die("clone");
  if (child == 0) {
    char c;
    close(sync[1]);
    while (read(sync[0], &c, 1) < 0 && errno == EINTR) {}
    _exit(0);
  }
  close(sync[0]);
  char p[64], map[64];
  int n = snprintf(map, sizeof map, "0 %u 1\n", uid);
  const char *files[] = {"uid_map", "gid_map"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "/proc/%d/%s", (int)child, files[i]);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, map, n) != n) die(files[i]);
    close(fd);
  }
  snprintf(p, sizeof p, "/proc/%d/ns/user", (int)child);
  int ns = open(p, O_RDONLY | O_CLOEXEC);
  if (ns < 0) die("user namespace");
  close(sync[1]);
  waitpid(child, 0, 0);
  return ns;
}

/* One mount: the directory beneath the drive's root, on its file system only (a symlink a sandbox left in the drive
   cannot lead the server anywhere else on the host), cloned detached, id-mapped, nosuid, nodev, read-only when
   asked. */
static int clone_tree(const char *drive_root, const char *sub, int ro, int uns) {
  int droot = open(drive_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (droot < 0) die("drive");
  struct open_how how = {0};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  int dir = syscall(SYS_openat2, droot, sub[0] ? sub : ".", &how, sizeof how);
  if (dir < 0) die("drivePath");
  int tree = syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (tree < 0) die("open_tree");
  struct mount_attr a = {0};
  a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0);
  a.userns_fd = uns;
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof a)) die("mount_setattr");
  close(dir);
  close(droot);
  return tree;
}

#define MAX_MOUNTS 64

int main(int argc, char **argv) {
  char p[64];
  /* mount <pid> <uid> <fresh 0|1> then, per mount, <mountPath> <driveRoot> <subPath> <ro 0|1> */
  int mounting = argc >= 9 && (argc - 5) % 4 == 0 && (argc - 5) / 4 <= MAX_MOUNTS && !strcmp(argv[1], "mount");
  if (!mounting && !(argc == 4 && !strcmp(argv[1], "umount"))) {
    fprintf(stderr, "usage: mount <pid> <uid> <fresh 0|1> (<mountPath> <driveRoot> <subPath> <ro 0|1>)... | umount <pid> <mountPath>\n");
    return 2;
  }
  const char *pid = argv[2];
  int trees[MAX_MOUNTS];
  int count = mounting ? (argc - 5) / 4 : 0;
  unsigned uid = mounting ? (unsigned)strtoul(argv[3], 0, 10) : 0;
  if (mounting) {
    int uns = idmap_userns(uid);
    for (int i = 0; i < count; i++) {
      char **m = argv + 5 + 4 * i;
      trees[i] = clone_tree(m[1], m[2], m[3][0] == '1', uns);
    }
    close(uns);
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
  if (!mounting) {
    snprintf(target, sizeof target, "%s", argv[3]);
    if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW)) die("umount");
    return 0;
  }
  int fresh = argv[4][0] == '1';
  for (int i = 0; i < count; i++) {
    snprintf(target, sizeof target, "%s", argv[5 + 4 * i]);
    make_path(target, uid, fresh);
    if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)) die("move_mount");
  }
  return 0;
}
`;

/** Root's alone; /run, so a reboot (a new kernel, perhaps) compiles it again. */
const HELPERS_DIR = join(RUN_DIR, 'helpers');
let compiled: Promise<string> | undefined;

/** The helper's path, compiled on first use (atomically: a half-written binary is never run). */
export function driveHelper(): Promise<string> {
  if (compiled) return compiled;
  const made = (async () => {
    const bin = join(
      HELPERS_DIR,
      `drive-mount-${createHash('sha256').update(SOURCE).digest('hex').slice(0, 12)}`,
    );
    if (existsSync(bin)) return bin;
    mkdirSync(HELPERS_DIR, { recursive: true, mode: 0o700 });
    // Per process: two servers compiling at once each write their own files and rename the same result.
    const tmp = `${bin}.${process.pid}`;
    writeFileSync(`${tmp}.c`, SOURCE);
    try {
      await run('cc', ['-O2', '-Wall', '-o', tmp, `${tmp}.c`]);
    } catch (e) {
      throw new Error(
        `the drive mount helper could not be compiled (install gcc and libc6-dev): ${(e as Error).message}`,
      );
    } finally {
      rmSync(`${tmp}.c`, { force: true });
    }
    chmodSync(tmp, 0o700);
    renameSync(tmp, bin);
    return bin;
  })();
  compiled = made;
  made.catch(() => {
    compiled = undefined;
  });
  return made;
}
