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
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>
#include <linux/openat2.h>

static void die(const char *what) { fprintf(stderr, "%s: %s\n", what, strerror(errno)); exit(1); }

/* The sandbox's mount table, read before entering it: mount points as the sandbox sees them. */
static char mounts[1 << 20];

/* A mount point strictly beneath dir: an overlay of dir would hide it, so dir is never overlaid then. */
static int mounts_beneath(const char *dir) {
  size_t n = strlen(dir);
  for (char *line = mounts; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : 0) {
    char mp[4096];
    const char *f = line;
    for (int i = 0; i < 4 && f; i++) { f = strchr(f, ' '); if (f) f++; }
    if (!f) continue;
    size_t k = 0;
    for (; *f && *f != ' ' && *f != '\n' && k < sizeof mp - 1; f++) {
      if (f[0] == '\\' && f[1] && f[2] && f[3]) { mp[k++] = (char)((f[1] - '0') * 64 + (f[2] - '0') * 8 + (f[3] - '0')); f += 3; }
      else mp[k++] = *f;
    }
    mp[k] = 0;
    if (!strncmp(mp, dir, n) && (n == 1 ? mp[1] != 0 : mp[n] == '/')) return 1;
  }
  return 0;
}

static int mkdir_as(int at, const char *name, unsigned uid) {
  setfsuid(uid); setfsgid(uid);
  int r = mkdirat(at, name, 0755);
  int err = errno;
  setfsuid(0); setfsgid(0);
  errno = err;
  return r;
}

/* mkdir -p of the relative path rest beneath dir at (all of it new): as the sandbox's uid, or as root then given
   to it (a layer only the server writes). */
static void mkdirs(int at, char *rest, unsigned uid, int as_uid) {
  int fd = at;
  for (char *name = rest, *next; name; name = next) {
    next = strchr(name, '/');
    if (next) *next++ = 0;
    if (!*name) continue;
    if (as_uid ? mkdir_as(fd, name, uid) : (mkdirat(fd, name, 0755) || fchownat(fd, name, uid, uid, AT_SYMLINK_NOFOLLOW)))
      die("mkdir");
    int sub = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) die("mkdir");
    if (fd != at) close(fd);
    fd = sub;
  }
  if (fd != at) close(fd);
}

/* The sandbox's root is its own tmpfs, read-only to the sandbox. A directory is made in it through a detached,
   writable clone of that mount: the sandbox's own view never turns writable, not even for an instant. */
static int on_root(const char *parent) {
  struct stat a, b;
  return !stat(parent, &a) && !stat("/", &b) && a.st_dev == b.st_dev;
}
static void mkdirs_in_root(const char *parent, char *rest, unsigned uid) {
  int rt = syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (rt < 0) die("open_tree /");
  struct mount_attr a = {0};
  a.attr_clr = MOUNT_ATTR_RDONLY;
  if (syscall(SYS_mount_setattr, rt, "", AT_EMPTY_PATH, &a, sizeof a)) die("mount_setattr /");
  struct open_how how = {0};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  int pd = syscall(SYS_openat2, rt, parent[1] ? parent + 1 : ".", &how, sizeof how);
  if (pd < 0) die(parent);
  mkdirs(pd, rest, uid, 1);
  close(pd); close(rt);
}

/* A directory of a read-only image (shared with other sandboxes, so never written): a read-only overlay of it
   over a small tmpfs holding only the new directories shows the directory's entries and the mount point, and
   nothing in it becomes writable. A mount beneath the directory would be hidden: refused then. */
#define ELSEWHERE "mount the drive in a writable directory (/home/user, /tmp), in a new top-level directory (/data)"
static void cannot_overlay(const char *parent, const char *step) {
  fprintf(stderr, "%s is read-only and could not be overlaid (%s: %s): " ELSEWHERE "\n", parent, step, strerror(errno));
  exit(1);
}
static void overlay_with(const char *parent, char *rest, unsigned uid) {
  if (mounts_beneath(parent)) {
    fprintf(stderr, "%s is read-only and has mounts beneath it: " ELSEWHERE " or a read-only directory without mounts beneath it\n", parent);
    exit(1);
  }
  struct stat st;
  struct statvfs sv;
  if (stat(parent, &st) || statvfs(parent, &sv)) die(parent);
  int fs = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) die("fsopen tmpfs");
  char v[32];
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "64k", 0)) die("tmpfs size");
  snprintf(v, sizeof v, "%o", st.st_mode & 07777);
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", v, 0)) die("tmpfs mode");
  snprintf(v, sizeof v, "%u", st.st_uid);
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "uid", v, 0)) die("tmpfs uid");
  snprintf(v, sizeof v, "%u", st.st_gid);
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "gid", v, 0)) die("tmpfs gid");
  if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, 0, 0, 0)) die("tmpfs");
  int top = syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0);
  if (top < 0) die("fsmount tmpfs");
  mkdirs(top, rest, uid, 0);
  int low = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (low < 0) die(parent);
  int ov = syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (ov < 0) cannot_overlay(parent, "fsopen overlay");
  if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, "lowerdir+", 0, top)) cannot_overlay(parent, "overlay layer");
  if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, "lowerdir+", 0, low)) cannot_overlay(parent, "overlay lower");
  if (syscall(SYS_fsconfig, ov, FSCONFIG_CMD_CREATE, 0, 0, 0)) cannot_overlay(parent, "overlay");
  unsigned attrs = MOUNT_ATTR_RDONLY | (sv.f_flag & ST_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
                   (sv.f_flag & ST_NODEV ? MOUNT_ATTR_NODEV : 0) | (sv.f_flag & ST_NOEXEC ? MOUNT_ATTR_NOEXEC : 0);
  int om = syscall(SYS_fsmount, ov, FSMOUNT_CLOEXEC, attrs);
  if (om < 0) cannot_overlay(parent, "fsmount overlay");
  if (syscall(SYS_move_mount, om, "", AT_FDCWD, parent, MOVE_MOUNT_F_EMPTY_PATH)) cannot_overlay(parent, "move_mount overlay");
}

/* mkdir -p as the sandbox's own uid, so a directory is made only where the sandbox could make it itself; where
   the path meets a read-only directory, the rest of it is made as above (in the root, or in an overlay). */
static void make_path(char *path, unsigned uid) {
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p) continue;
    char c = *p;
    *p = 0;
    int r = mkdir_as(AT_FDCWD, path, uid);
    int err = errno;
    *p = c;
    if (r && err == EROFS) {
      const char *s = p - 1;
      while (*s != '/') s--;
      char parent[4096], rest[4096];
      snprintf(parent, sizeof parent, "%.*s", s > path ? (int)(s - path) : 1, path);
      snprintf(rest, sizeof rest, "%s", s + 1);
      /* The directory itself, not a symlink to it (the image's /lib -> usr/lib): that is what gets overlaid. */
      char real[PATH_MAX];
      if (realpath(parent, real)) snprintf(parent, sizeof parent, "%s", real);
      if (on_root(parent)) mkdirs_in_root(parent, rest, uid);
      else overlay_with(parent, rest, uid);
      return;
    }
    if (r && err != EEXIST) { errno = err; die("mkdir"); }
    if (!c) break;
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
  snprintf(p, sizeof p, "/proc/%s/mountinfo", pid);
  FILE *mi = fopen(p, "re");
  if (!mi) die("mountinfo");
  size_t got = fread(mounts, 1, sizeof mounts - 1, mi);
  if (got == sizeof mounts - 1) { fprintf(stderr, "the sandbox has too many mounts\n"); return 1; }
  mounts[got] = 0;
  fclose(mi);
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
    /* Where the mount is, symlinks resolved: the path the sandbox's mount table (and so the list) shows. */
    char real[PATH_MAX];
    printf("%s\n", realpath(target, real) ? real : target);
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
