// Creating and tearing down one sandbox's host resources, in the order that keeps a crash at any
// point recoverable: the state record is written right after the slot is claimed, so a later
// teardown always knows which cgroups, namespace and layer to remove.
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MIN_PIDS, type SandboxSpec } from '../driver.js';
import { type CgroupHost, SandboxCgroup } from './cgroup.js';
import { mountWritableLayer, unmountLayer, WRITABLE_DIRS } from './disk.js';
import { run } from './exec.js';
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
import { imageRoot, installedImage } from './rootfs.js';
import { noDumpLoader } from './nodump.js';
import { claimSlot, releaseSlot, slotOwner } from './slots.js';
import { isProcessAlive, processStartTime, readRecord, type SandboxRecord, writeRecord } from './state.js';

/** Inside the sandbox: the spec's envs as JSON, which the daemon merges into every process it starts. */
export const SANDBOX_ENV_FILE = `${SANDBOX_SOCKET_DIR}/env.json`;
/** Node starts in ~25 ms; a loaded host or a cold page cache can take seconds. */
const START_TIMEOUT_MS = 20_000;

export interface HostContext {
  dataDir: string;
  cgroupHost: CgroupHost;
  uidBase: number;
  codeDir: string;
  command: string[];
  baseEtc: string;
  seccompFile?: string;
  netPool: NetPool;
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
  const pooled = ctx.netPool.take(dir);
  const slot = pooled ?? claimSlot(dir);
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
    socketPath: req.paths.socketPath,
    createdAt: new Date().toISOString(),
  };
  writeRecord(dir, rec); // from here on a crash leaves enough to tear everything down
  const cg = new SandboxCgroup(ctx.cgroupHost, name);
  await cg.kill(); // debris under our slot's name (see createSlotNetwork); a no-op when absent
  cg.create({
    memoryMb: spec.memoryMb,
    pidsMax: Math.max(MIN_PIDS, spec.pidsMax),
    cpuShares: spec.cpuShares,
  });
  const rwDir = join(LAYERS_DIR, name);
  await Promise.all([
    pooled === undefined ? createSlotNetwork(net) : undefined,
    mountWritableLayer(rwDir, spec.diskMb, hostUid), // always fresh: nothing a previous holder planted
  ]);
  const runDir = sandboxRunDir(name);
  let egressEnvs: Record<string, string> = {};
  if (spec.egress) {
    // Before anything runs inside: the sandbox's first packet already meets its policy.
    egressEnvs = await ctx.egress.apply(
      { address: net.address, hostAddress: net.hostAddress, runDir, uid: hostUid, label: req.id },
      spec.egress,
    );
    rec.egress = withoutSecrets(spec.egress);
    writeRecord(dir, rec);
  }
  const envs = { ...sandboxEnv(req.id, spec), ...egressEnvs };
  writeEnvFile(runDir, hostUid, envs);
  const volumes = [];
  for (const v of spec.volumes) {
    if (!v.readOnly) await ownVolume(v.hostPath, hostUid);
    volumes.push({ ...v, hostPath: await exposeDir(v.hostPath) });
  }
  const root = await Promise.all(
    imageRoot(ctx.dataDir, spec.image, ctx.baseEtc).map(async (e) =>
      e.kind === 'bind' ? { ...e, src: await exposeDir(e.src) } : e,
    ),
  );
  const logFile = join(dir, 'daemon.log');
  const rootDir = installedImage(ctx.dataDir, spec.image) ?? '/';
  const pid = launch({
    id: req.id,
    netnsPath: net.netnsPath,
    hostUid,
    cgroupProcs: cg.procsFiles(),
    root,
    writable: WRITABLE_DIRS.map((w) => ({ src: join(rwDir, w.sub), dest: w.target })),
    runDir,
    codeDir: await exposeDir(ctx.codeDir),
    nodeModulesDirs: await Promise.all(nodeModulesFor(ctx.codeDir).map((d) => exposeDir(d))),
    volumes,
    seccompFile: ctx.seccompFile,
    env: {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: '/home/user',
      USER: 'root',
      LANG: 'C.UTF-8',
      ...envs,
      BERTH_SANDBOX_SOCKET: SANDBOX_SOCKET,
      BERTH_SANDBOX_ENV_FILE: SANDBOX_ENV_FILE,
    },
    command: ctx.command,
    loaders: daemonLoaders(rootDir, ctx.command[0]),
    logFile,
  });
  rec.pid = pid;
  rec.pidStart = processStartTime(pid) ?? 0;
  writeRecord(dir, rec);
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

/** A writable volume must belong to this sandbox's uid; files of a previous holder are re-owned. */
async function ownVolume(hostPath: string, uid: number): Promise<void> {
  mkdirSync(hostPath, { recursive: true });
  if (statSync(hostPath).uid !== uid) await run('chown', ['-R', `${uid}:${uid}`, hostPath]);
}

/** Kill, then delete cgroups, netns, layer, socket dir, state dir and slot; tolerant of each being gone. */
export async function teardownSandbox(ctx: HostContext, dir: string, paths: SandboxPaths): Promise<void> {
  const rec = readRecord(dir);
  // After a reboot /run is empty and the record's slot may belong to a newer sandbox by now: its
  // kernel objects are only ours while the slot still points at us (or at no one).
  const owner = rec ? slotOwner(rec.slot) : undefined;
  if (rec && (owner === dir || owner === undefined)) {
    const cg = new SandboxCgroup(ctx.cgroupHost, rec.name);
    await cg.kill();
    if (isProcessAlive(rec.pid, rec.pidStart)) process.kill(rec.pid, 'SIGKILL'); // died before joining
    await cg.remove();
    await deleteSlotNetwork(slotNet(rec.slot, rec.name));
    if (rec.egress) await ctx.egress.release(rec.address);
    await unmountLayer(join(LAYERS_DIR, rec.name));
  }
  rmSync(paths.socketPath, { force: true });
  rmSync(dir, { recursive: true, force: true });
  if (rec) releaseSlot(rec.slot, dir);
}
