// Watches one directory, or a whole tree, with one inotify watch per directory (fs.watch without `recursive`:
// Node 20's own recursive mode on Linux drops modify and attribute events). Reports CREATE, WRITE, REMOVE and
// CHMOD; a rename arrives as REMOVE of the old name and CREATE of the new one.
import { type FSWatcher, watch } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { basename, join, sep } from 'node:path';
import type { FileEvent, WatchOp } from '../schema.js';
import { walk } from './walk.js';

/** Directories one watch covers at most (inotify watches are a per-user kernel budget, 8192 by default). */
export const MAX_WATCHED_DIRS = 2048;
/** Files whose mode and owner a watch remembers (oldest forgotten first); bounds memory on busy trees. */
const MAX_REMEMBERED_FILES = 10_000;

type Owner = { mode: number; uid: number; gid: number };

export class TreeWatcher {
  private watchers = new Map<string, FSWatcher>();
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly recursive: boolean,
    private readonly emit: (e: FileEvent) => void,
  ) {}

  /** Arms the watches; events that happen after this resolves are reported. */
  /** What this watch last saw of each file it reported, to tell a chmod from a write. */
  private readonly seen = new Map<string, Owner>();

  private remember(abs: string, st: Owner): void {
    this.seen.delete(abs);
    this.seen.set(abs, { mode: st.mode, uid: st.uid, gid: st.gid });
    if (this.seen.size > MAX_REMEMBERED_FILES) this.seen.delete(this.seen.keys().next().value as string);
  }

  async start(): Promise<void> {
    this.add(this.root, true);
    if (this.recursive) await this.addTree(this.root);
  }

  close(): void {
    this.closed = true;
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }

  private async addTree(dir: string): Promise<void> {
    for await (const e of walk(dir)) {
      if (this.closed || this.watchers.size >= MAX_WATCHED_DIRS) return;
      if (e.type === 'directory') this.add(e.abs, false);
    }
  }

  private add(dir: string, mustWork: boolean): void {
    if (this.closed || this.watchers.has(dir) || this.watchers.size >= MAX_WATCHED_DIRS) return;
    let w: FSWatcher;
    try {
      w = watch(dir, { persistent: false }, (type, name) => {
        if (!name) return;
        // Events are handled one at a time, in order: each needs an lstat to tell what happened.
        this.queue = this.queue.then(() => this.handle(dir, type, name.toString()));
      });
    } catch (err) {
      if (mustWork) throw err;
      return;
    }
    w.on('error', () => this.drop(dir));
    this.watchers.set(dir, w);
  }

  private drop(dir: string): void {
    for (const [d, w] of this.watchers) {
      if (d === dir || d.startsWith(dir + sep)) {
        w.close();
        this.watchers.delete(d);
      }
    }
  }

  private async handle(dir: string, type: string, name: string): Promise<void> {
    if (this.closed) return;
    const abs = join(dir, name);
    const st = await lstat(abs).catch(() => undefined);
    let op: WatchOp;
    const prev = this.seen.get(abs);
    if (st) this.remember(abs, st);
    else this.seen.delete(abs);
    if (type === 'rename') {
      op = st ? 'CREATE' : 'REMOVE';
      if (!st) this.drop(abs);
      else if (this.recursive && st.isDirectory()) {
        this.add(abs, false);
        // Whatever was created inside before the watch was armed is watched too.
        await this.addTree(abs);
      }
    } else if (st && prev) {
      // inotify says only "changed": a chmod/chown changes mode or owner, a write does not. Compared with what this
      // watch last saw, because a chmod right after a write can share its (coarse) timestamp.
      op = st.mode !== prev.mode || st.uid !== prev.uid || st.gid !== prev.gid ? 'CHMOD' : 'WRITE';
    } else {
      // A file this watch has not seen yet: a write moves mtime and ctime together; a chmod/chown moves ctime alone.
      op = st && st.ctimeMs !== st.mtimeMs ? 'CHMOD' : 'WRITE';
    }
    if (!this.closed) this.emit({ op, name: basename(abs), path: dir, error: null });
  }
}
