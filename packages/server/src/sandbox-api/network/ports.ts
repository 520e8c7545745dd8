// GET /network/process/{pid}/ports: the TCP ports a process — or any process below it — listens on. `pid` is an
// OS pid, or the id or name of a process started through the API.
import type { SandboxApi } from '../context.js';
import { badRequest, sendJson } from '../http.js';
import type { Handler } from '../router.js';
import type { PortInfo } from '../schema.js';
import { processTree, readListeners, socketInodes } from './proc-net.js';

export function processPorts(api: SandboxApi): Handler {
  return async ({ res, params }) => {
    const managed = api.processes.find(params.pid);
    const pid = managed?.osPid ?? Number(params.pid);
    if (!Number.isInteger(pid) || pid <= 0) throw badRequest('invalid PID');
    const owners = await socketInodes(await processTree(pid));
    const ports: PortInfo[] = [];
    const seen = new Set<string>();
    for (const l of await readListeners()) {
      const owner = owners.get(l.inode);
      if (owner === undefined) continue;
      const key = `${l.protocol}/${l.localAddr}/${l.localPort}`;
      if (seen.has(key)) continue;
      seen.add(key);
      ports.push({
        protocol: l.protocol,
        localAddr: l.localAddr,
        localPort: l.localPort,
        state: 'LISTEN',
        pid: owner,
      });
    }
    sendJson(res, 200, { pid, ports });
  };
}
