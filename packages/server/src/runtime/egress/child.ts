// The egress child process: Berth's DNS and the egress proxy, apart from the server so that a crash in either
// (hostile traffic is what they parse) ends only them. The server restarts it and re-sends every policy; while
// it is down the redirected ports refuse connections, so sandboxes under a policy have no network: fail closed.
import type { CaMaterial } from './ca.js';
import { EgressDns } from './dns-server.js';
import { Interceptor } from './intercept.js';
import { DENY_ALL, type EgressPolicy } from './policy.js';
import type { ChildConfig, FromChild, ToChild, TrafficEvent } from './protocol.js';
import { EgressProxy } from './proxy.js';
import { GuardedResolver } from './resolve.js';
import { TrafficBatcher } from './traffic.js';
import { holdEgressPorts, releaseEgressPorts } from '../linux/network.js';

const send = (m: FromChild) => process.send?.(m);

// Sent together, at most 20 ms after the first (traffic.ts); what waits goes on every way out, a crash included
// ('exit' runs after an uncaught exception): only a SIGKILL loses it.
const traffic = new TrafficBatcher((events) => send({ type: 'traffic', events }));
const report = (e: TrafficEvent) => traffic.report(e);
const flushTraffic = () => traffic.flush();
process.on('exit', flushTraffic);

async function main(): Promise<void> {
  const config = JSON.parse(process.env.BERTH_EGRESS_CONFIG ?? '{}') as ChildConfig;
  const policies = new Map<string, EgressPolicy>();
  // A source with no policy is a sandbox the server has not described (yet): it reaches nothing.
  const policyOf = (source: string) => policies.get(source) ?? DENY_ALL;
  const resolver = new GuardedResolver({ servers: config.resolvers, allowCidrs: config.allowCidrs });
  const cas = new Map<string, CaMaterial>();
  const interceptor = new Interceptor(
    policyOf,
    (s) => cas.get(s),
    (request) => report({ type: 'request', request }),
  );
  const proxy = new EgressProxy(policyOf, resolver, (line) => report({ type: 'audit', line }), interceptor);
  const dns = new EgressDns(policyOf, resolver, (decision) => report({ type: 'dns', decision }));
  process.on('message', (m: ToChild) => {
    if (m.type === 'policy') {
      policies.set(m.source, m.policy);
      if (m.ca) cas.set(m.source, m.ca);
      else cas.delete(m.source);
    } else {
      policies.delete(m.source);
      cas.delete(m.source);
      interceptor.forget(m.source);
    }
    // Answers cached for a sandbox go with any change: a narrowed or removed policy, or an address given back.
    resolver.forget(m.source);
    proxy.revalidate(m.source);
    if (m.type === 'policy' && m.seq !== undefined) send({ type: 'applied', seq: m.seq });
  });
  let held = false;
  const stop = () => {
    flushTraffic();
    // Ports released before the sockets close: a next child can only listen (and hold them) after this exit.
    const released = held ? releaseEgressPorts(config.ports) : Promise.resolve();
    void released.finally(() => process.exit(0));
  };
  // The server gone means no one restarts or feeds us: stop, and the sandboxes' egress with us.
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
  await proxy.listen(config.ports);
  await dns.listen(config.ports.dns);
  await holdEgressPorts(config.ports);
  held = true;
  send({ type: 'ready' });
}

main().catch((e) => {
  send({ type: 'failed', message: (e as Error).message });
  process.exit(1);
});
