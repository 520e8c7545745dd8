// The host-wide collector of what dead servers left (decision 062). Kernel names, addresses and uids are the
// machine's, not a data dir's (slots.ts): a server killed with SIGKILL whose data dir is then deleted leaves its
// sandboxes' namespaces, veths, cgroups, mounts, nftables elements and processes to nobody. Each server start runs
// this (linux-driver.ts), operators run it as `berth host sweep`. It removes only what provably belongs to no live
// server, from facts (a process named by pid and start time, a directory that exists, a cgroup that is empty),
// never from age; and a slot's objects only while it holds the slot's claim itself, so no server can be creating or
// tearing down the same names meanwhile.
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type CgroupHost, SandboxCgroup } from './cgroup.js';
import { mountsUnder, unmountLayer } from './disk.js';
import { run } from './exec.js';
import { LAYERS_DIR, RUN_DIR, sandboxPaths, VIEWS_DIR } from './host.js';
import { slotName } from './net-pool.js';
import {
  boundPorts,
  deleteSlotNetwork,
  egressTableText,
  setEgressControl,
  setRawEgress,
  slotNet,
} from './network.js';
import { entryAlive, type ServerEntry, serverEntries } from './servers.js';
import { claimedSlots, claimFreeSlot, releaseSlot, transferSlot } from './slots.js';
import { isProcessAlive, processStartTime, readRecord, writeRecord } from './state.js';
import { sandboxEnd } from './create.js';
import { unmountViews } from './views.js';
import { Tables } from './host-tables.js';
import { dataDirGone, sweepDataDirMounts, sweepSockets } from './host-sweep-files.js';

/** Where a sweep names itself while it holds slots: `<pid>.<start>`, stale once that process is dead. */
const SWEEP_DIR = `${RUN_DIR}/sweep`;

export interface SweepReport {
  /** Slot claims removed, and kept (a live server's or a sandbox waiting for its restarted server). */
  claims: number;
  kept: number;
  /** Network namespaces and host veth ends deleted. */
  networks: number;
  cgroups: number;
  processes: number;
  /** Elements of `inet berth_egress` (policed, owners, raw_allowed, snat_to) and `inet berth_private` allowed. */
  nftElements: number;
  /** Per-server chains `server_<port>` of `inet berth_egress`. */
  chains: number;
  /** Layers, views, volume mounts and exposures unmounted. */
  mounts: number;
  loopDevices: number;
  sockets: number;
  /** Entries of /run/berth/servers of dead drivers. */
  servers: number;
  /** Slots with objects but no claim (a teardown cut short), cleaned. */
  orphans: number;
  /** Sandbox directories of the starting driver's data dir that had no record (removeUnrecorded). */
  unrecorded: number;
  /** What could not be removed, and why (left for the next sweep). */
  failures: string[];
}

/** What a claim's owner path says: the data dir it belongs to, and the process it names (pools and sweeps). */
interface Owner {
  kind: 'sandbox' | 'pool' | 'warm' | 'sweep';
  dataDir?: string;
  id?: string;
  tag?: { pid: number; start: number };
}

export function parseOwner(path: string): Owner | undefined {
  let m = /^(\/.*)\/sandboxes\/([^/]+)$/.exec(path);
  if (m) return { kind: 'sandbox', dataDir: m[1], id: m[2] };
  m = /^(\/.*)\/(pool|warm|warm-img\/[^/]+)\/((\d+)\.(\d+)\.\d+)$/.exec(path);
  if (m)
    return {
      kind: m[2] === 'pool' ? 'pool' : 'warm',
      dataDir: m[1],
      id: m[2] === 'pool' ? undefined : `${m[2]}/${m[3]}`,
      tag: { pid: Number(m[4]), start: Number(m[5]) },
    };
  m = /^\/run\/berth\/sweep\/(\d+)\.(\d+)$/.exec(path);
  if (m) return { kind: 'sweep', tag: { pid: Number(m[1]), start: Number(m[2]) } };
  return undefined;
}

/** The pass under way in this process: drivers starting together share it (they would share its name too). */
let inflight: Promise<SweepReport> | undefined;

export function sweepHost(cgroupHost: CgroupHost): Promise<SweepReport> {
  inflight ??= sweepOnce(cgroupHost).finally(() => {
    inflight = undefined;
  });
  return inflight;
}

export const emptySweepReport = (): SweepReport => ({
  claims: 0,
  kept: 0,
  networks: 0,
  cgroups: 0,
  processes: 0,
  nftElements: 0,
  chains: 0,
  mounts: 0,
  loopDevices: 0,
  sockets: 0,
  servers: 0,
  orphans: 0,
  unrecorded: 0,
  failures: [],
});

/**
 * Removes the sandbox directories of `dataDir` that have no record, with everything named after the slots they
 * claim. A server killed while it removed a sandbox leaves one (the record goes with the directory's files, before
 * the directory itself), as does one killed between making a new sandbox's directory and writing its record. No
 * driver lists such a directory, so no owner could ever collect it, and its slot's claim stays while it exists.
 * Only for the data dir's own driver, at its start: before it starts anything, so none of them is being created.
 */
export async function removeUnrecorded(
  dataDir: string,
  cgroupHost: CgroupHost,
  report: SweepReport,
): Promise<void> {
  const root = join(dataDir, 'sandboxes');
  const dirs = readdirSync(root)
    .map((id) => join(root, id))
    .filter((dir) => !readRecord(dir));
  if (!dirs.length) return;
  const tables = await Tables.read();
  const claims = claimedSlots();
  for (const dir of dirs) {
    const slots = claims.filter((c) => c.owner === dir).map((c) => c.slot);
    let clean = true;
    for (const slot of slots) clean = (await cleanSlot(slot, cgroupHost, tables, report)) && clean;
    if (!clean) continue; // its claim stays with it: the next start tries again
    rmSync(dir, { recursive: true, force: true });
    for (const slot of slots) await releaseSlot(slot, dir);
    report.unrecorded++;
  }
}

async function sweepOnce(cgroupHost: CgroupHost): Promise<SweepReport> {
  const report = emptySweepReport();
  const me = `${process.pid}.${processStartTime(process.pid) ?? 0}`;
  const sweeper = join(SWEEP_DIR, me);
  mkdirSync(sweeper, { recursive: true, mode: 0o700 });
  const facts = new HostFacts();
  try {
    const tables = await Tables.read();
    const claimed = new Set<number>();
    for (const { slot, owner } of claimedSlots()) {
      claimed.add(slot);
      if (owner === sweeper) continue;
      const verdict = judge(owner, slot, cgroupHost, facts);
      if (verdict === 'keep') {
        report.kept++;
        continue;
      }
      // Compared and replaced under the slots' lock: the claim is ours only if it still names that owner.
      if (!(await transferSlot(slot, owner, sweeper))) continue;
      const o = parseOwner(owner);
      // Judged again now that nobody can start or tear down anything under this slot: a server of that data dir
      // may have started in between (a restart adopting its sandboxes): then the claim goes back to its owner.
      if (verdict === 'if-still-dead' && judge(owner, slot, cgroupHost, new HostFacts()) === 'keep') {
        if (existsSync(owner)) {
          await transferSlot(slot, sweeper, owner);
          report.kept++;
          continue;
        }
      }
      // Its restarted server reports how it ended (out of memory: FAILED, not started again) from its record.
      if (verdict === 'if-still-dead' && o?.kind === 'sandbox') recordEnd(owner, slot, cgroupHost);
      if (!(await cleanSlot(slot, cgroupHost, tables, report))) {
        await releaseSlot(slot, sweeper);
        continue;
      }
      if (o?.dataDir && o.id && dataDirGone(o.dataDir))
        rmSync(sandboxPaths(o.dataDir, o.id).socketPath, { force: true });
      // A pool's or warm pool's directory of a dead driver holds nothing a restart adopts once its slot is gone;
      // a sandbox's record stays for its restarted server, which reports the sandbox dead and replaces it.
      if (o?.kind === 'pool' || o?.kind === 'warm') rmSync(owner, { recursive: true, force: true });
      await releaseSlot(slot, sweeper);
      report.claims++;
    }
    // Objects named after a slot nobody holds: left by a teardown cut short, or by a claim removed by hand.
    for (const slot of slotsWithObjects(cgroupHost, tables)) {
      if (claimed.has(slot) || !claimFreeSlot(slot, sweeper)) continue;
      if (await cleanSlot(slot, cgroupHost, tables, report)) report.orphans++;
      await releaseSlot(slot, sweeper);
    }
    const step = (what: string, fn: () => Promise<void>) =>
      fn().catch((e: Error) => void report.failures.push(`${what}: ${e.message}`));
    // Read again: what jumps to a chain may have gone since (this pass's cleaning, or another server's sweep).
    await step('egress chains', async () => sweepChains(facts, await Tables.read(), report));
    await step('mounts', () => sweepDataDirMounts(report));
    await step('sockets', () => sweepSockets(report));
    // A dead driver's entry says its data dir is served by nobody (no scan of the processes needed) until its data
    // dir goes or a new driver of it starts.
    for (const e of facts.entries) {
      if (entryAlive(e)) continue;
      if (
        !dataDirGone(e.dataDir) &&
        !facts.entries.some((o) => o !== e && o.dataDir === e.dataDir && entryAlive(o))
      )
        continue;
      rmSync(e.file, { force: true });
      report.servers++;
    }
    for (const n of existsSync(SWEEP_DIR) ? readdirSync(SWEEP_DIR) : []) {
      const [pid, start] = n.split('.').map(Number);
      if (n !== me && !isProcessAlive(pid, start))
        rmSync(join(SWEEP_DIR, n), { recursive: true, force: true });
    }
  } finally {
    rmSync(sweeper, { recursive: true, force: true });
  }
  return report;
}

/**
 * Whether a claim may go: 'keep'; 'gone' (its data dir or its process is gone: nothing can adopt it); or
 * 'if-still-dead' (its data dir exists but no driver serves it, and its sandbox is dead: a restarted server would
 * only replace it).
 */
function judge(
  owner: string,
  slot: number,
  cgroupHost: CgroupHost,
  facts: HostFacts,
): 'keep' | 'gone' | 'if-still-dead' {
  const o = parseOwner(owner);
  if (!o) return 'keep'; // not a name Berth writes: not ours to judge
  // Another sweep at work (its directory exists while it runs).
  if (o.kind === 'sweep')
    return isProcessAlive(o.tag!.pid, o.tag!.start) && existsSync(owner) ? 'keep' : 'gone';
  const dir = o.dataDir!;
  if (dataDirGone(dir)) return 'gone';
  // A pooled network is its driver's alone (net-pool.ts): with that process gone, nothing adopts it.
  if (o.kind === 'pool') return isProcessAlive(o.tag!.pid, o.tag!.start) ? 'keep' : 'gone';
  if (facts.served(dir)) return 'keep';
  if (sandboxAlive(slot, owner, cgroupHost)) return 'keep'; // its server's restart adopts it
  return 'if-still-dead';
}

function recordEnd(owner: string, slot: number, cgroupHost: CgroupHost): void {
  const rec = readRecord(owner);
  const ended = sandboxEnd(cgroupHost, slotName(slot));
  if (!rec || rec.slot !== slot || !ended) return;
  try {
    writeRecord(owner, { ...rec, ended });
  } catch {
    // Torn down meanwhile by its restarted server.
  }
}

function sandboxAlive(slot: number, owner: string, cgroupHost: CgroupHost): boolean {
  const cg = new SandboxCgroup(cgroupHost, slotName(slot));
  if (cg.dirs().some((d) => procsOf(d).length > 0)) return true;
  const rec = readRecord(owner);
  return !!rec && rec.slot === slot && rec.pid > 0 && isProcessAlive(rec.pid, rec.pidStart);
}

function procsOf(cgroupDir: string): number[] {
  try {
    return readFileSync(join(cgroupDir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Facts about the host's live drivers, read once per pass. */
class HostFacts {
  readonly entries: ServerEntry[] = serverEntries();
  private procRefs?: string[][];

  /**
   * Some live driver serves `dir`: the entries of its drivers decide when it has any (servers.ts); else (a server
   * that predates them) a live driver's pool named by its process, or a process that is not a sandbox's with `dir`
   * in its command line, as its working directory or among its open files.
   */
  served(dir: string): boolean {
    const named = this.entries.filter((e) => e.dataDir === dir);
    if (named.length) return named.some(entryAlive);
    for (const sub of ['pool', 'warm'])
      for (const n of existsSync(join(dir, sub)) ? readdirSync(join(dir, sub)) : []) {
        const [pid, start] = n.split('.').map(Number);
        if (isProcessAlive(pid, start)) return true;
      }
    this.procRefs ??= processReferences();
    const under = (p: string) => p === dir || p.startsWith(`${dir}/`) || p === `--data-dir=${dir}`;
    return this.procRefs.some((refs) => refs.some(under));
  }

  /** The data dirs live processes were started with (`--data-dir`), for servers that predate registration. */
  dataDirArgs(): string[] {
    this.procRefs ??= processReferences();
    const out: string[] = [];
    for (const refs of this.procRefs)
      for (let i = 0; i < refs.length; i++) {
        if (refs[i] === '--data-dir' && refs[i + 1]) out.push(refs[i + 1]);
        else if (refs[i].startsWith('--data-dir=')) out.push(refs[i].slice('--data-dir='.length));
      }
    return out;
  }
}

/** For each live process outside Berth's sandbox cgroups: its command line, working directory and open files. */
function processReferences(): string[][] {
  const out: string[][] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (/:\/berth\/sb\d+$/m.test(readFileSync(`/proc/${p}/cgroup`, 'utf8'))) continue;
      const refs = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').filter(Boolean);
      try {
        refs.push(readlinkSync(`/proc/${p}/cwd`));
      } catch {}
      try {
        for (const fd of readdirSync(`/proc/${p}/fd`))
          try {
            refs.push(readlinkSync(`/proc/${p}/fd/${fd}`));
          } catch {}
      } catch {}
      out.push(refs);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/**
 * Kills and deletes everything named after `slot`; the caller holds its claim. Idempotent. A failure is reported
 * and the claim released all the same: whoever claims the slot next deletes what is left under its names first
 * (create.ts, network.ts createSlotNetwork).
 */
async function cleanSlot(
  slot: number,
  cgroupHost: CgroupHost,
  tables: Tables,
  report: SweepReport,
): Promise<boolean> {
  try {
    await cleanSlotObjects(slot, cgroupHost, tables, report);
    return true;
  } catch (e) {
    report.failures.push(`slot ${slot}: ${(e as Error).message}`);
    return false;
  }
}

async function cleanSlotObjects(
  slot: number,
  cgroupHost: CgroupHost,
  tables: Tables,
  report: SweepReport,
): Promise<void> {
  const name = slotName(slot);
  const net = slotNet(slot, name);
  const cg = new SandboxCgroup(cgroupHost, name);
  // Every process of the sandbox: its cgroups', and any in its network namespace outside them.
  const pids = new Set(cg.dirs().flatMap(procsOf));
  for (const pid of processesInNetns(net.netnsPath)) pids.add(pid);
  for (const pid of pids)
    try {
      process.kill(pid, 'SIGKILL');
      report.processes++;
    } catch {}
  const dirs = cg.dirs().filter((d) => existsSync(d));
  if (dirs.length) {
    await cg.kill();
    for (const d of dirs)
      for (let i = 0; procsOf(d).length && i < 1000; i++) await new Promise((r) => setTimeout(r, 5));
    await cg.remove();
    report.cgroups++;
  }
  if (existsSync(net.netnsPath) || existsSync(`/sys/class/net/${net.hostIf}`)) report.networks++;
  report.nftElements += tables.count(net.address);
  await deleteSlotNetwork(net);
  await setEgressControl(net.address, undefined);
  await setRawEgress(net.address, undefined);
  const layer = join(LAYERS_DIR, name);
  report.mounts += mountsUnder(join(VIEWS_DIR, name)).length + mountsUnder(layer).length;
  await unmountViews(name);
  await unmountLayer(layer);
}

function processesInNetns(netnsPath: string): number[] {
  let ns: { dev: number; ino: number };
  try {
    ns = statSync(netnsPath);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = statSync(`/proc/${p}/ns/net`);
      // Both: a namespace file left unmounted is a plain file of /run, whose inode number means nothing here.
      if (st.ino === ns.ino && st.dev === ns.dev) out.push(Number(p));
    } catch {}
  }
  return out;
}

/** Slots that have a cgroup, a namespace, a veth, a layer, views or nftables elements on this host. */
function slotsWithObjects(cgroupHost: CgroupHost, tables: Tables): Set<number> {
  const out = tables.slots();
  const add = (dir: string, re: RegExp) => {
    for (const n of existsSync(dir) ? readdirSync(dir) : []) {
      const m = re.exec(n);
      if (m) out.add(Number(m[1]));
    }
  };
  for (const d of new SandboxCgroup(cgroupHost, 'x').dirs()) add(join(d, '..'), /^sb(\d+)$/);
  add('/run/netns', /^berth-sb(\d+)$/);
  add('/sys/class/net', /^bh(\d+)$/);
  add(LAYERS_DIR, /^sb(\d+)$/);
  add(VIEWS_DIR, /^sb(\d+)$/);
  return out;
}

/**
 * Per-server chains of `inet berth_egress` no live server uses: no `owners` element jumps to it, no socket of the
 * host listens on its port, no live registered driver has it, and no live server started with `--data-dir` records
 * it. A server starting meanwhile (registered after the list was read) gets its chain back at once.
 */
async function sweepChains(facts: HostFacts, tables: Tables, report: SweepReport): Promise<void> {
  const chains = tables.chains.filter((n) => /^server_\d+$/.test(n));
  const jumped = tables.jumped;
  const used = new Set<number>(facts.entries.filter(entryAlive).map((e) => e.egressPort));
  const bound = boundPorts();
  const unused = chains.filter((c) => {
    const port = Number(c.slice('server_'.length));
    return !jumped.has(c) && !used.has(port) && !bound.has(port);
  });
  if (unused.length)
    for (const dir of facts.dataDirArgs()) {
      try {
        used.add(JSON.parse(readFileSync(join(dir, 'egress-ports.json'), 'utf8')).explicit);
      } catch {}
    }
  for (const chain of unused) {
    const port = Number(chain.slice('server_'.length));
    if (used.has(port)) continue;
    try {
      await run('nft', ['delete', 'chain', 'inet', 'berth_egress', chain]);
      report.chains++;
    } catch {
      continue; // an owner jumped to it meanwhile: in use
    }
    const started = serverEntries().find((e) => entryAlive(e) && e.egressPort === port);
    if (started?.egressPorts) {
      await run('nft', ['-f', '-'], egressTableText(started.egressPorts));
      report.chains--;
    }
  }
}
