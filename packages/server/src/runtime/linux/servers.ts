// The drivers running on this host, one file each in /run/berth/servers: which data dir each serves and its egress
// chain. The host sweep (host-sweep.ts) keeps whatever a live driver may still use; a driver's process is named by
// pid and start time, so a recycled pid is never mistaken for it, and a driver killed with SIGKILL is dead as soon
// as its process is, without any timeout.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { EgressPorts } from './egress-ports.js';
import { RUN_DIR } from './host.js';
import { isProcessAlive, processStartTime } from './state.js';

export const SERVERS_DIR = `${RUN_DIR}/servers`;

export interface ServerEntry {
  pid: number;
  start: number;
  /** Absolute and normalised, as the owners of its slot claims spell it. */
  dataDir: string;
  /** Its explicit egress port: its chain in `inet berth_egress` is `server_<port>`. */
  egressPort: number;
  egressPorts?: EgressPorts;
  file: string;
}

let seq = 0;

/** Records a driver of this process (several drivers, even of one data dir, may share a process: tests). */
export function registerServer(dataDir: string, egressPorts: EgressPorts): string {
  mkdirSync(SERVERS_DIR, { recursive: true, mode: 0o700 });
  const file = join(SERVERS_DIR, `${process.pid}.${processStartTime(process.pid) ?? 0}.${seq++}.json`);
  // By rename: a reader never sees half an entry.
  writeFileSync(`${file}.tmp`, JSON.stringify({ dataDir: resolve(dataDir), egressPorts }), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return file;
}

export function unregisterServer(file: string): void {
  rmSync(file, { force: true });
}

/** Every recorded driver, live or not (a dead one's entry stays until a sweep removes it). */
export function serverEntries(): ServerEntry[] {
  let names: string[] = [];
  try {
    names = readdirSync(SERVERS_DIR);
  } catch {
    return [];
  }
  const out: ServerEntry[] = [];
  for (const n of names) {
    const m = /^(\d+)\.(\d+)\.\d+\.json(\.tmp)?$/.exec(n);
    if (!m) continue;
    if (m[3]) {
      // A write its process did not finish.
      if (!isProcessAlive(Number(m[1]), Number(m[2]))) rmSync(join(SERVERS_DIR, n), { force: true });
      continue;
    }
    const file = join(SERVERS_DIR, n);
    try {
      const { dataDir, egressPorts } = JSON.parse(readFileSync(file, 'utf8'));
      const egressPort = egressPorts?.explicit;
      out.push({ pid: Number(m[1]), start: Number(m[2]), dataDir, egressPort, egressPorts, file });
    } catch {
      // Removed meanwhile by its driver's close.
    }
  }
  return out;
}

export const entryAlive = (e: ServerEntry) => isProcessAlive(e.pid, e.start);
