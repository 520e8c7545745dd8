// Creating and tearing down one sandbox's host resources, in the order that keeps a crash at any
// point recoverable: the state record is written right after the slot is claimed, so a later
// teardown always knows which cgroups, namespace and layer to remove.
import { mkdirSync, statfsSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { MIN_PIDS, type SandboxEnd, type SandboxSpec } from '../driver.js';
import { type CgroupHost, SandboxCgroup } from './cgroup.js';
import { mountWritableLayer, unmountLayer } from './disk.js';
import {
  exposeDir,
  LAYERS_DIR,
  nodeModulesFor,
  type SandboxPaths,
  sandboxRunDir,
  sandboxSocketLinkDir,
} from './host.js';
import { launch, SANDBOX_SOCKET, SANDBOX_SOCKET_DIR, waitForSocket } from './launch.js';
import type { EgressControl } from './egress-control.js';
import { writeRunFile } from './run-file.js';
import { withoutSecrets } from '../egress/policy.js';
import { type NetPool, slotName } from './net-pool.js';
import { createSlotNetwork, deleteSlotNetwork, slotNet } from './network.js';
import type { StoredImage } from '../images/image-store.js';
import { imageUser } from '../images/image-user.js';
import { hostUserland, rootfsPlan } from './rootfs.js';
import { noDumpLoader } from './nodump.js';
import { mountRoot, mountViews, unmountViews, viewsDir } from './views.js';
import { claimFreeSlot, claimSlot, releaseSlot, slotOwner } from './slots.js';
import {
  isProcessAlive,
  processStartTimeAsync,
  readRecord,
  type SandboxRecord,
  writeRecordAsync,
} from './state.js';

/** Inside the sandbox: the spec's envs as JSON, which the daemon merges into every process it starts. */
export const SANDBOX_ENV_FILE = `${SANDBOX_SOCKET_DIR}/env.json`;
/** The daemon's stdout and stderr, in the sandbox's state dir on the host (launch.ts caps it). */
export const DAEMON_LOG = 'daemon.log';
/** Node starts in ~25 ms; a loaded host or a cold page cache can take seconds. */
const START_TIMEOUT_MS = 20_000;

export interface HostContext {
  dataDir: string;
  cgroupHost: CgroupHost;
  uidBase: number;
  codeDir: string;
  command: string[];
  /** The default image's /etc (rootfs.ts ensureBaseEtc); its parent is that image's root. */
  baseEtc: string;
  /** The mount points of every root (rootfs.ts ensureInitLayer). */
  initLayer: string;
  seccompFile?: string;
  netPool: NetPool;
  /** Private ranges this server's sandboxes may reach (BERTH_SANDBOX_ALLOW_CIDRS; network.ts setAllowedRanges). */
  allowCidrs: string[];
  startTimeoutMs?: number;
  egress: EgressControl;
}

export interface StartRequest {
  /** State directory (`<dataDir>/sandboxes/<id>`, or a warm-pool directory). */
  dir: string;
  id: string;
  paths: SandboxPaths;
  spec: SandboxSpec;
  hash: string;
  /** The image from the store the spec names (or the empty one); absent for the default image (the host userland). */
  image?: StoredImage;
  /** A warm pool's sandbox: its daemon runs its process path once before it listens (sandbox-api/process/warm-up.ts). */
  warm?: boolean;
}

/** Everything the sandbox's processes may read about themselves, as env vars and as the env file. */
export function sandboxEnv(id: string, spec: SandboxSpec): Record<string, string> {
  return { ...spec.envs, BERTH_SANDBOX_ID: id };
}

/** Writes the env file into the sandbox's run dir (0600, its own uid); see run-file.ts for why it is safe. */
export function writeEnvFile(runDir: string, uid: number, env: Record<string, string>): void {
  writeRunFile(runDir, uid, 'env.json', JSON.stringify(env));
}

export async function startSandbox(ctx: HostContext, req: StartRequest): Promise<SandboxRecord> {
  const { dir, spec } = req;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pooled = await ctx.netPool.take(dir);
  const slot = pooled ?? (await claimSlot(dir));
  const name = slotName(slot);
  const net = slotNet(slot, name);
  const hostUid = ctx.uidBase + slot;
  const rec: SandboxRecord = {
    id: req.id,
    slot,
    name,
    pid: 0,
    pidStart: 0,
    hostUid,
    address: net.address,
    hostAddress: net.hostAddress,
    specHash: req.hash,
    image: spec.image,
    ...(spec.owner ? { workspace: spec.owner.workspace, owner: spec.owner } : {}),
    ...(req.image ? { rootfs: req.image.rootfs } : {}),
    socketPath: req.paths.socketPath,
    createdAt: new Date().toISOString(),
    ...(spec.volumes.length ? { mountsPending: true } : {}),
    socketPending: true,
  };
  await writeRecordAsync(dir, rec); // from here on a crash leaves enough to tear everything down
  const cg = new SandboxCgroup(ctx.cgroupHost, name);
  await cg.kill(); // debris under our slot's name (see createSlotNetwork); a no-op when absent
  await cg.create({
    memoryMb: spec.memoryMb,
    pidsMax: Math.max(MIN_PIDS, spec.pidsMax),
    cpuShares: spec.cpuShares,
  });
  const rwDir = join(LAYERS_DIR, name);
  const image = req.image;
  const nodeModules = nodeModulesFor(ctx.codeDir);
  const [, , views] = await Promise.all([
    pooled === undefined ? createSlotNetwork(net, ctx.allowCidrs) : undefined,
    mountWritableLayer(rwDir, spec.diskMb, hostUid), // always fresh: nothing a previous holder planted
    // Everything bound from a path of the host's own goes through a view (views.ts): no host path in mountinfo.
    mountViews(name, [ctx.baseEtc, ctx.codeDir, ...nodeModules]),
  ]);
  const [etcView, codeView, ...nodeModulesViews] = views;
  const plan = rootfsPlan({
    initLayer: ctx.initLayer,
    hostRoot: dirname(ctx.baseEtc),
    etcView,
    ...(image ? { image: { rootfs: image.rootfs, layers: spec.layers } } : {}),
    ...(spec.snapshotLayers?.length ? { snapshotLayers: spec.snapshotLayers } : {}),
  });
  const rootDir = await mountRoot(name, rwDir, hostUid, plan);
  const runDir = sandboxRunDir(name);
  let egressEnvs: Record<string, string> = {};
  if (spec.egress) {
    // Before anything runs inside: the sandbox's first packet already meets its policy.
    egressEnvs = await ctx.egress.apply(
      { address: net.address, hostAddress: net.hostAddress, runDir, uid: hostUid, label: req.id },
      spec.egress,
    );
    rec.egress = withoutSecrets(spec.egress);
    await writeRecordAsync(dir, rec);
  }
  const envs = { ...sandboxEnv(req.id, spec), ...egressEnvs };
  writeEnvFile(runDir, hostUid, envs);
  const viewed = `${viewsDir(name)}/`;
  const binds = await Promise.all(
    plan.binds.map(async (b) =>
      b.src.startsWith(viewed) ? b : { ...b, src: await exposeDir(ctx.dataDir, b.src) },
    ),
  );
  const logFile = join(dir, DAEMON_LOG);
  const host = image ? hostUserland() : undefined;
  const loaders = daemonLoaders('/', ctx.command[0]);
  if (image && !loaders) throw new Error("an image root needs the host's node to be dynamically linked");
  const pid = await launch({
    id: req.id,
    netnsPath: net.netnsPath,
    hostUid,
    cgroupProcs: cg.procsFiles(),
    root: rootDir,
    binds,
    runDir,
    codeDir: codeView,
    nodeModulesDirs: nodeModulesViews,
    seccompFile: ctx.seccompFile,
    env: {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: '/home/user',
      USER: 'root',
      LANG: 'C.UTF-8',
      ...(image ? imageEnv(image) : {}),
      ...envs,
      BERTH_SANDBOX_SOCKET: SANDBOX_SOCKET,
      BERTH_SANDBOX_ENV_FILE: SANDBOX_ENV_FILE,
      ...(req.warm ? { BERTH_SANDBOX_WARM_UP: '1' } : {}),
    },
    command: host ? ctx.command.map(host.rebase) : ctx.command,
    loaders,
    ...(host ? { hostUserland: { shell: host.shell, loaderArgs: host.loaderArgs } } : {}),
    ...(image || spec.user
      ? {
          user: imageUser(
            image?.rootfs ?? '/nonexistent',
            spec.user ?? image?.config.user,
            `image ${spec.image}`,
          ),
        }
      : {}),
    logFile,
  });
  rec.pid = pid;
  rec.pidStart = (await processStartTimeAsync(pid)) ?? 0;
  await writeRecordAsync(dir, rec);
  const timeout = ctx.startTimeoutMs ?? START_TIMEOUT_MS;
  await waitForSocket(
    runDir,
    sandboxSocketLinkDir(name),
    req.paths.socketPath,
    pid,
    rec.pidStart,
    logFile,
    timeout,
  );
  rec.socketPending = undefined;
  await writeRecordAsync(dir, rec);
  return rec;
}

/**
 * Execute-only copies of the loaders of the image's /bin/sh (pid 1) and of the daemon's program, so both run
 * non-dumpable; a static program (no loader) leaves the launch as it was.
 */
function daemonLoaders(root: string, program: string): { init: string; command: string } | undefined {
  const init = noDumpLoader(root, '/bin/sh');
  const command = noDumpLoader(root, program);
  return init && command ? { init, command } : undefined;
}

/**
 * The image config's Env, and its WorkingDir as the daemon's default directory when the image has that directory
 * (a directory the runtime provides, /home or /tmp, would be empty: the daemon's own default is kept then).
 */
function imageEnv(image: StoredImage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of image.config.env) {
    const eq = kv.indexOf('=');
    if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const wd = image.config.workingDir;
  if (wd && isAbsolute(wd) && statSync(join(image.rootfs, wd), { throwIfNoEntry: false })?.isDirectory())
    out.BERTH_SANDBOX_WORKDIR = wd;
  return out;
}

/** Kill, then delete cgroups, netns, layer, socket dir, state dir and slot; tolerant of each being gone. */
/**
 * Teardowns under way, by sandbox dir. A second teardown of the same sandbox (a warm pool trimmed while a take finds
 * the same one dead) shares the first: run on its own, it could pass the slot check before the first released the
 * slot and then delete, by slot name, the network of whoever claimed that slot next.
 */
const tearingDown = new Map<string, Promise<void>>();

export function teardownSandbox(ctx: HostContext, dir: string, paths: SandboxPaths): Promise<void> {
  const running = tearingDown.get(dir);
  if (running) return running;
  const once = teardownOnce(ctx, dir, paths).finally(() => tearingDown.delete(dir));
  tearingDown.set(dir, once);
  return once;
}

async function teardownOnce(ctx: HostContext, dir: string, paths: SandboxPaths): Promise<void> {
  const rec = readRecord(dir);
  // After a reboot /run is empty and the record's slot may belong to a newer sandbox by now: its
  // kernel objects are only ours while the slot still points at us (or at no one).
  // A claim gone (a reboot, or the host sweep removed a dead sandbox's: host-sweep.ts) is taken again first, so
  // that nobody claims the slot and makes its names while they are deleted here.
  const owner = rec ? slotOwner(rec.slot) : undefined;
  if (rec && (owner === dir || (owner === undefined && claimFreeSlot(rec.slot, dir)))) {
    const cg = new SandboxCgroup(ctx.cgroupHost, rec.name);
    await cg.kill();
    if (isProcessAlive(rec.pid, rec.pidStart)) process.kill(rec.pid, 'SIGKILL'); // died before joining
    await cg.remove();
    await deleteSlotNetwork(slotNet(rec.slot, rec.name));
    if (rec.egress) await ctx.egress.release(rec.address);
    await unmountViews(rec.name); // the root's overlays first: they hold the layer's file system
    await unmountLayer(join(LAYERS_DIR, rec.name));
  }
  await rm(paths.socketPath, { force: true });
  await rm(dir, { recursive: true, force: true });
  if (rec) await releaseSlot(rec.slot, dir);
}

/** What a dead sandbox's cgroup and layer still say about its end; undefined once they are removed. */
export function sandboxEnd(cgroupHost: CgroupHost, name: string): SandboxEnd | undefined {
  const cg = new SandboxCgroup(cgroupHost, name);
  if (!cg.exists()) return undefined;
  try {
    const s = cg.stats();
    const fs = statfsSync(join(LAYERS_DIR, name));
    return {
      oomKills: s.oomKills,
      memoryLimitBytes: s.memoryLimitBytes,
      diskUsedBytes: (fs.blocks - fs.bfree) * fs.bsize,
    };
  } catch {
    return undefined; // torn down meanwhile
  }
}
