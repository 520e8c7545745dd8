// `berth host sweep`: removes what servers killed on this host left behind (decision 062), the pass every server
// start runs: run by an operator after deleting a data dir whose server was killed, or to see what a host holds.
// Local: it acts on this machine's kernel objects, as root, not through a server's API.
import type { Command } from 'commander';

/** The report as a person reads it: what went, then what was kept and what failed. */
export function renderSweep(r: Record<string, number | string[]>): string {
  const labels: Array<[string, string]> = [
    ['claims', 'slot claims'],
    ['orphans', 'slots with objects but no claim'],
    ['networks', 'network namespaces'],
    ['cgroups', 'cgroups'],
    ['processes', 'processes killed'],
    ['nftElements', 'nftables elements'],
    ['chains', 'egress chains'],
    ['mounts', 'mounts'],
    ['loopDevices', 'loop devices'],
    ['sockets', 'sockets'],
    ['servers', 'entries of dead servers'],
  ];
  const out = ['removed:'];
  for (const [k, label] of labels) out.push(`  ${label.padEnd(32)} ${r[k] ?? 0}`);
  out.push(
    `kept: ${r.kept ?? 0} slot claims of live servers or of sandboxes waiting for their server's restart`,
  );
  const failures = (r.failures as string[] | undefined) ?? [];
  for (const f of failures) out.push(`not removed: ${f}`);
  return `${out.join('\n')}\n`;
}

export function registerHost(program: Command) {
  const host = program
    .command('host')
    .description("this machine's sandbox runtime state (run as root on the host)");
  host
    .command('sweep')
    .description(
      'remove what killed servers left on this host: their sandboxes, namespaces, cgroups, mounts and nftables elements, once their data dir is deleted or their sandboxes are dead (a live server and its sandboxes are never touched)',
    )
    .option('-o, --output <format>', 'json (default: text)')
    .action(async (o: { output?: string }) => {
      if (o.output !== undefined && o.output !== 'json')
        throw new Error(`unknown output format ${JSON.stringify(o.output)}: use json`);
      if (process.getuid?.() !== 0)
        throw new Error('berth host sweep acts on the kernel objects of sandboxes: run it as root');
      const { sweepHost } = await import('@berth/server/runtime/linux/host-sweep.js');
      const { detectCgroups } = await import('@berth/server/runtime/linux/cgroup.js');
      const report = await sweepHost(detectCgroups());
      process.stdout.write(
        o.output === 'json'
          ? `${JSON.stringify(report, null, 2)}\n`
          : renderSweep(report as unknown as Record<string, number | string[]>),
      );
      if (report.failures.length) process.exitCode = 1;
    });
}
