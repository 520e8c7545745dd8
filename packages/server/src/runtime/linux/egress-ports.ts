// The host ports of this server's egress child, chosen once per data dir and kept: the explicit proxy's port is
// in every policed sandbox's HTTP_PROXY, so it must outlive restarts, and two servers on one host (each with its
// own data dir) must not share them.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';

/** The host ports of one server's egress child. */
export interface EgressPorts {
  /** HTTP_PROXY / HTTPS_PROXY inside sandboxes (CONNECT and absolute-form). */
  explicit: number;
  /** Where sandbox TCP to port 443 is redirected. */
  tls: number;
  /** Where sandbox TCP to port 80 is redirected. */
  http: number;
  /** Where sandbox UDP and TCP to port 53 is redirected. */
  dns: number;
}

/** The ports a server takes when they are free: the documented ones, so a single server on a host keeps them. */
export const DEFAULT_EGRESS_PORTS: EgressPorts = { explicit: 15128, tls: 15443, http: 15080, dns: 15053 };
const FILE = 'egress-ports.json';

/**
 * This data dir's ports: the recorded ones, else the defaults when all are free and not `recorded` by another live
 * server (servers.ts), else four free ports.
 */
export async function egressPortsFor(
  dataDir: string,
  recorded: (p: EgressPorts) => boolean = () => false,
): Promise<EgressPorts> {
  const file = join(dataDir, FILE);
  if (existsSync(file)) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as EgressPorts;
    if ([p.explicit, p.tls, p.http, p.dns].every((n) => Number.isInteger(n) && n > 0 && n < 65536)) return p;
  }
  // Free means more than unbound: another live server may have recorded them and not started its egress child yet
  // (it starts on the first policy), and two children on one port fail each other.
  const taken = recorded(DEFAULT_EGRESS_PORTS);
  const ports = !taken && (await allFree(DEFAULT_EGRESS_PORTS)) ? DEFAULT_EGRESS_PORTS : await freePorts();
  writeFileSync(file, `${JSON.stringify(ports)}\n`, { mode: 0o644 });
  return ports;
}

async function allFree(p: EgressPorts): Promise<boolean> {
  const tcp = await Promise.all([p.explicit, p.tls, p.http, p.dns].map((n) => tcpFree(n)));
  return tcp.every(Boolean) && (await udpFree(p.dns));
}

/** Four ports the kernel hands out as free now (the DNS one free for UDP too). */
async function freePorts(): Promise<EgressPorts> {
  const held: Array<ReturnType<typeof createServer>> = [];
  const take = async (): Promise<number> => {
    for (;;) {
      const srv = createServer();
      await new Promise<void>((resolve, reject) => srv.listen(0, '0.0.0.0', resolve).once('error', reject));
      held.push(srv); // held until all four are chosen, so the kernel does not hand out one twice
      const port = (srv.address() as { port: number }).port;
      if (await udpFree(port)) return port;
    }
  };
  try {
    return { explicit: await take(), tls: await take(), http: await take(), dns: await take() };
  } finally {
    for (const s of held) s.close();
  }
}

function tcpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '0.0.0.0', () => srv.close(() => resolve(true)));
  });
}

function udpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => resolve(false));
    s.bind(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}
