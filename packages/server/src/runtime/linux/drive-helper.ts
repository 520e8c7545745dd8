// The tiny C program that puts volumes and drives into a running sandbox's mount namespace (decisions 020, 031),
// and mounts the read-only views a sandbox's root is made from (views.ts, decision 041).
// Node cannot call open_tree, mount_setattr, setns or move_mount, and a `mount` binary run inside the sandbox's
// root would be the sandbox's own program; so the server compiles this once (cached by the source's hash under
// /run/berth/helpers, shared by every data dir of the machine) and runs it as root. It clones each directory into
// a detached mount, id-mapped so files stored as uid 0 on disk show as the sandbox's own user, read-only when asked,
// then enters the sandbox's mount namespace, confines itself to the sandbox's root (chroot: every path and symlink
// resolves as the sandbox sees it, never on the host), makes the mount point (in the read-only root through a
// detached writable clone of it, under a read-only image directory through a read-only overlay) and attaches it.
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec.js';
import { EMPTY_DIR, RUN_DIR } from './host.js';

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
#include <sys/wait.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>
#include <linux/openat2.h>

#define EMPTY_LOWER "${EMPTY_DIR}"

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

/* One mount: the directory beneath the drive's root, on its file system only, through no symlink at all, cloned
   detached, id-mapped, nosuid, nodev, read-only when asked. No symlink: the server judged the drive's permissions
   on the path as asked, and a symlink a sandbox left in the drive (a/esc -> ../b) would lead elsewhere in it, or
   anywhere on the host. */
static int clone_tree(const char *drive_root, const char *sub, int ro, int uns) {
  int droot = open(drive_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (droot < 0) die("drive");
  struct open_how how = {0};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS;
  int dir = syscall(SYS_openat2, droot, sub[0] ? sub : ".", &how, sizeof how);
  if (dir < 0 && errno == ELOOP) {
    fprintf(stderr, "drivePath /%s goes through a symbolic link: mount the directory it points to\n", sub);
    exit(1);
  }
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

/* view <emptyDir> <dir> <source>...: mounts at <dir>/<i> a read-only overlay of each source (and of the empty
   directory, as overlay needs two layers without an upper one), the source named "." from inside it. A bind would
   show the source's path on its file system in the sandbox's mount table; an overlay is a file system of its own,
   whose root is "/" and whose options show only the names it was given. */
static int views(int n, char **argv) {
  const char *empty = argv[2], *dir = argv[3];
  char at[4096], opts[4200];
  if (strchr(empty, ',') || strchr(empty, ':')) { fprintf(stderr, "unusable empty directory %s\n", empty); return 1; }
  snprintf(opts, sizeof opts, "lowerdir=.:%s", empty);
  for (int i = 0; i < n; i++) {
    snprintf(at, sizeof at, "%s/%d", dir, i);
    if (mkdir(at, 0711) && errno != EEXIST) die(at);
    int src = open(argv[4 + i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (src < 0 || fchdir(src)) die(argv[4 + i]);
    if (mount("berth-view", at, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts)) die("overlay");
    close(src);
  }
  return 0;
}

/* One writable overlay: the lowers (topmost first), each cloned detached, id-mapped (files stored as uid 0 show as the
   sandbox's own user, so it may write what root owns there), read-only, nosuid, nodev; over them an upper and a work
   directory made in <name> of the sandbox's layer (a detached clone of its tmpfs, so every write lands in that capped
   layer). Layers given as descriptors: the mount table shows "lowerdir+=/,upperdir=/ovl/<name>/upper", no host path.
   redirect_dir, metacopy and index off: an upper directory is then self-contained (whole files, whiteouts and opaque
   directories only), which is what a build reads back as a layer. */
static void overlay_root(int layer, int uns, unsigned uid, const char *target, const char *name, int n, char **lowers) {
  if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) { fprintf(stderr, "bad overlay name %s\n", name); exit(1); }
  if (mkdirat(layer, "ovl", 0700) && errno != EEXIST) die("ovl");
  int ovl = openat(layer, "ovl", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ovl < 0) die("ovl");
  if (mkdirat(ovl, name, 0700)) die("overlay directory");
  int nd = openat(ovl, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (nd < 0) die("overlay directory");
  struct stat top;
  if (stat(lowers[0], &top)) die("lower");
  if (mkdirat(nd, "upper", 0700) || mkdirat(nd, "work", 0700)) die("upper");
  if (fchownat(nd, "upper", uid, uid, AT_SYMLINK_NOFOLLOW) || fchmodat(nd, "upper", top.st_mode & 07777, 0)) die("upper");
  int up = openat(nd, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int wk = openat(nd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (up < 0 || wk < 0) die("upper");
  int ov = syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (ov < 0) die("fsopen overlay");
  const char *off[] = {"redirect_dir", "metacopy", "index"};
  for (int i = 0; i < 3; i++)
    if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_STRING, off[i], "off", 0)) die(off[i]);
  int trees[400];
  for (int i = 0; i < n; i++) {
    int t = trees[i] = syscall(SYS_open_tree, AT_FDCWD, lowers[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (t < 0) die("open_tree lower");
    struct mount_attr a = {0};
    a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    a.userns_fd = uns;
    if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a)) die("mount_setattr lower");
    if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, "lowerdir+", 0, t)) die("overlay lower");
  }
  if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, "upperdir", 0, up)) die("overlay upper");
  if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, "workdir", 0, wk)) die("overlay work");
  if (syscall(SYS_fsconfig, ov, FSCONFIG_CMD_CREATE, 0, 0, 0)) die("overlay");
  int om = syscall(SYS_fsmount, ov, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (om < 0) die("fsmount overlay");
  if (syscall(SYS_move_mount, om, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)) die("move_mount overlay");
  /* Only now: closing a detached tree dissolves it, and the overlay clones its layers at creation. */
  for (int i = 0; i < n; i++) close(trees[i]);
  close(om); close(ov); close(up); close(wk); close(nd); close(ovl);
}

/* root <uid> <layer> then, per overlay, <target> <name> <count> <lower>...: a sandbox's root and the directories mounted
   in it (a later target may lie inside an earlier one: the host userland's /usr in the root of the default image). */
static int roots(int argc, char **argv) {
  unsigned uid = (unsigned)strtoul(argv[2], 0, 10);
  int layer = syscall(SYS_open_tree, AT_FDCWD, argv[3], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (layer < 0) die("open_tree layer");
  int uns = idmap_userns(uid);
  for (int i = 4; i < argc;) {
    if (i + 3 > argc) { fprintf(stderr, "root: incomplete overlay\n"); return 2; }
    int n = atoi(argv[i + 2]);
    if (n < 1 || n > 400 || i + 3 + n > argc) { fprintf(stderr, "root: bad lower count\n"); return 2; }
    overlay_root(layer, uns, uid, argv[i], argv[i + 1], n, argv + i + 3);
    i += 3 + n;
  }
  close(uns);
  close(layer);
  return 0;
}

/* merge <target> <lower>...: a read-only overlay of the lowers (topmost first) and the empty directory at target, for
   the server itself to read a build's stage as one tree (COPY --from); never shown to a sandbox. */
static int merge(int argc, char **argv) {
  int ov = syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (ov < 0) die("fsopen overlay");
  for (int i = 3; i <= argc; i++) {
    const char *l = i < argc ? argv[i] : EMPTY_LOWER;
    if (syscall(SYS_fsconfig, ov, FSCONFIG_SET_STRING, "lowerdir+", l, 0)) die("overlay lower");
  }
  if (syscall(SYS_fsconfig, ov, FSCONFIG_CMD_CREATE, 0, 0, 0)) die("overlay");
  int om = syscall(SYS_fsmount, ov, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (om < 0) die("fsmount overlay");
  if (syscall(SYS_move_mount, om, "", AT_FDCWD, argv[2], MOVE_MOUNT_F_EMPTY_PATH)) die("move_mount overlay");
  return 0;
}

int main(int argc, char **argv) {
  char p[64];
  if (argc >= 5 && !strcmp(argv[1], "view")) return views(argc - 4, argv);
  if (argc >= 8 && !strcmp(argv[1], "root")) return roots(argc, argv);
  if (argc >= 4 && argc < 500 && !strcmp(argv[1], "merge")) return merge(argc, argv);
  /* mount <pid> <uid> then, per mount, <mountPath> <driveRoot> <subPath> <ro 0|1>; prints each mount point as the
     sandbox's mount table names it (symlinks resolved), one a line. */
  int mounting = argc >= 8 && (argc - 4) % 4 == 0 && (argc - 4) / 4 <= MAX_MOUNTS && !strcmp(argv[1], "mount");
  if (!mounting && !(argc == 4 && !strcmp(argv[1], "umount"))) {
    fprintf(stderr, "usage: mount <pid> <uid> (<mountPath> <driveRoot> <subPath> <ro 0|1>)... | umount <pid> <mountPath> | view <emptyDir> <dir> <source>... | root <uid> <layer> (<target> <name> <count> <lower>...)... | merge <target> <lower>...\n");
    return 2;
  }
  const char *pid = argv[2];
  snprintf(p, sizeof p, "/proc/%s/mountinfo", pid);
  FILE *mi = fopen(p, "re");
  if (!mi) die("mountinfo");
  size_t got = fread(mounts, 1, sizeof mounts - 1, mi);
  if (got == sizeof mounts - 1) { fprintf(stderr, "the sandbox has too many mounts\n"); return 1; }
  mounts[got] = 0;
  fclose(mi);
  int trees[MAX_MOUNTS];
  int count = mounting ? (argc - 4) / 4 : 0;
  unsigned uid = mounting ? (unsigned)strtoul(argv[3], 0, 10) : 0;
  if (mounting) {
    int uns = idmap_userns(uid);
    for (int i = 0; i < count; i++) {
      char **m = argv + 4 + 4 * i;
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
  for (int i = 0; i < count; i++) {
    snprintf(target, sizeof target, "%s", argv[4 + 4 * i]);
    make_path(target, uid);
    if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)) die("move_mount");
    char real[PATH_MAX];
    const char *at = realpath(target, real) ? real : target;
    printf("%s\n", at);
    /* Later mounts of this run see it beneath their directories too (an overlay would hide it). */
    size_t used = strlen(mounts);
    used += snprintf(mounts + used, sizeof mounts - used, "0 0 0:0 / ");
    for (const char *c = at; *c && used + 5 < sizeof mounts; c++)
      used += *c == ' ' || *c == '\t' || *c == '\n' || *c == '\\'
        ? (size_t)snprintf(mounts + used, sizeof mounts - used, "\\%03o", (unsigned char)*c)
        : (size_t)snprintf(mounts + used, sizeof mounts - used, "%c", *c);
    snprintf(mounts + used, sizeof mounts - used, " rw\n");
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
