// `berth deploy [dir]`: reads berth.toml (or blaxel.toml, manifest.ts), creates or replaces the agent, function or job
// with `?upload=true` (its spec fields judged strictly by the server), PUTs the packed source to the upload URL the
// server answers, then shows the build as it runs (its log, and its steps as phases) and waits, through the server's
// watch, for the outcome. Progress goes to stderr; stdout gets the address the new code answers at.
// Exit status: 0 when the new code serves (or takes the canary share asked for), 1 when the build or the start failed
// (with the reason), 3 when it was built and deployed but takes no traffic — `spec.revision.active` pins another
// revision — with the command that promotes it. `--traffic N` ships it as a canary with N% of the requests.
import { resolve } from 'node:path';
import type { KindInfo } from '@berth/sdk';
import { kindByName } from '@berth/sdk';
import type { Command } from 'commander';
import { BuildLogView } from './build-log.js';
import { Api, ApiFailure, openStream, warningLines } from './client.js';
import { addressOf } from './columns.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { mergeEnvs, parseEnvs, parseMemory, parseVolumes } from './flags.js';
import { type ManifestObject, manifestObject, manifestProblem } from './manifest.js';
import { packSource } from './package-source.js';
import { Progress } from './progress.js';
import { promoteCommand, revisionOfSource, shareOf } from './traffic.js';
import { outcomeLine, waitFor } from './wait.js';

/** Longest `deploy` waits for the outcome (builds are bounded at 15 minutes on the server). */
const WAIT_MS = 20 * 60_000;
/** Upload attempts, with a fresh URL each (the service's CLI retries the same way). */
const UPLOAD_ATTEMPTS = 5;
/** Exit status of a deploy whose new revision takes no traffic. */
export const EXIT_NO_TRAFFIC = 3;

interface DeployOptions {
  name?: string;
  kind?: string;
  traffic?: string;
  wait: boolean;
  memory?: string;
  env?: string[];
  volume?: string[];
}

export { manifestObject };

/** What the manifest and the flags say, over what the server holds now (a deploy adds code, it resets nothing). */
function merge(m: ManifestObject, before: any, o: DeployOptions) {
  const spec = m.body.spec;
  const was = before?.spec ?? {};
  // A pinned revision or a canary set on the server stays: a deploy adds a revision, it does not reset traffic.
  if (was.revision) spec.revision = was.revision;
  // So do triggers and volumes set with the API or `berth apply`, unless the manifest or flags give their own.
  if (m.plural !== 'jobs' && was.triggers && !spec.triggers) spec.triggers = was.triggers;
  const volumes = parseVolumes(o.volume);
  if (volumes.length) spec.volumes = volumes;
  else if (was.volumes && !spec.volumes) spec.volumes = was.volumes;
  const memory = parseMemory(o.memory);
  const envs = mergeEnvs(was.runtime?.envs, parseEnvs(o.env));
  if (memory !== undefined || envs) {
    spec.runtime = { ...(spec.runtime ?? {}) };
    if (memory !== undefined) spec.runtime.memory = memory;
    if (envs) spec.runtime.envs = envs;
  }
}

/** PUTs the zip to a fresh upload URL, retrying a server error; true when the server had this source already. */
async function upload(api: Api, m: ManifestObject, zip: Buffer): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    let put: Awaited<ReturnType<Api['call']>>;
    try {
      put = await api.call('PUT', `/${m.plural}/${m.name}`, {
        body: m.body,
        query: { upload: 'true', fieldValidation: 'Strict' },
      });
    } catch (e) {
      const said = e instanceof ApiFailure ? manifestProblem(m, e) : undefined;
      if (said) throw new Error(said);
      throw e;
    }
    process.stderr.write(warningLines(`${m.plural.slice(0, -1)}/${m.name}`, put.body));
    const url = put.headers.get('x-blaxel-upload-url');
    if (!url) throw new Error('the server gave no upload URL');
    const res = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: new Uint8Array(zip),
    });
    const text = await res.text();
    if (res.ok) return JSON.parse(text).alreadyPresent === true;
    if (res.status < 500 || attempt >= UPLOAD_ATTEMPTS) {
      let problem: any;
      try {
        problem = JSON.parse(text);
      } catch {
        problem = { detail: text };
      }
      throw new ApiFailure(res.status, problem);
    }
    await new Promise((r) => setTimeout(r, 1000 * 2 ** (attempt - 1)));
  }
}

/** Shows the build log while the build runs (it ends with the build). */
async function followBuild(cfg: CliConfig, plural: string, name: string, progress: Progress) {
  const view = new BuildLogView(progress);
  let res: Response;
  try {
    res = await openStream(cfg, `/${plural}/${encodeURIComponent(name)}/revisions/latest/logs`, {
      follow: 'true',
    });
  } catch (e) {
    // Built already (the same source elsewhere) or not started: the watch that follows tells what happens.
    if (e instanceof ApiFailure && e.status === 404) return;
    throw e;
  }
  const dec = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
    view.push(dec.decode(chunk, { stream: true }));
  view.push(dec.decode());
  view.end();
}

/** Gives the fresh revision `percent`% as a canary beside `stable`, and waits until it takes it. */
async function shipCanary(
  cfg: CliConfig,
  kd: KindInfo,
  o: any,
  stable: string,
  fresh: string,
  percent: number,
  progress: Progress,
) {
  const api = new Api(cfg);
  const path = `/${kd.plural}/${o.metadata.name}`;
  await api.call('PUT', path, {
    body: {
      metadata: { name: o.metadata.name },
      spec: { ...o.spec, revision: { active: stable, canary: fresh, canaryPercent: percent } },
    },
  });
  progress.phase(`giving the canary ${percent}%`);
  return waitFor(
    cfg,
    kd,
    `/${kd.plural}`,
    o.metadata.name,
    progress,
    WAIT_MS,
    (x) => x?.status === 'FAILED' || (x?.status === 'DEPLOYED' && x?.canaryRevision === fresh),
  );
}

async function deploy(dirArg: string | undefined, opts: DeployOptions) {
  const dir = resolve(dirArg ?? '.');
  const cfg = loadCliConfig();
  const api = new Api(cfg);
  const m = await manifestObject(dir, opts.name, opts.kind);
  const kd = kindByName(m.plural)!;
  const label = `${kd.kind.toLowerCase()}/${m.name}`;
  for (const w of m.warnings) process.stderr.write(`warning: ${w}\n`);
  const traffic = opts.traffic === undefined ? undefined : Number(opts.traffic);
  if (traffic !== undefined && !(Number.isInteger(traffic) && traffic >= 1 && traffic <= 99))
    throw new Error(`--traffic wants a whole percentage from 1 to 99, got ${JSON.stringify(opts.traffic)}`);
  if (traffic !== undefined && (m.plural === 'jobs' || !opts.wait))
    throw new Error('--traffic applies to agents and functions, and waits for the deploy (no --no-wait)');
  const progress = new Progress();
  try {
    progress.phase('packing the source');
    const packed = await packSource(dir);
    progress.note(`packed ${packed.files.length} files (${packed.zip.length} bytes, ${packed.digest})`);
    let before: any;
    try {
      ({ body: before } = await api.call('GET', `/${m.plural}/${m.name}`));
    } catch (e) {
      if (!(e instanceof ApiFailure && e.status === 404)) throw e;
    }
    merge(m, before, opts);
    // A canary deploy pins the serving revision first, so the new one goes in at 0% until it gets its share.
    const stable: string | undefined = traffic !== undefined ? before?.activeRevision : undefined;
    if (traffic !== undefined && !stable)
      progress.note('no revision serves yet: this first one takes all traffic');
    if (stable) m.body.spec.revision = { active: stable };
    progress.phase(`uploading ${Math.ceil(packed.zip.length / 1024)} KB`);
    const same = await upload(api, m, packed.zip);
    if (same) progress.note('upload: the server has this source already, nothing new to build');
    if (!opts.wait) {
      progress.stop();
      process.stderr.write(
        `uploaded; follow it with \`berth describe ${kd.kind.toLowerCase()} ${m.name} --watch\`\n`,
      );
      return;
    }
    if (!same) {
      progress.phase('building');
      await followBuild(cfg, m.plural, m.name, progress);
    }
    let outcome = await waitFor(cfg, kd, `/${m.plural}`, m.name, progress, WAIT_MS);
    const fresh = revisionOfSource(outcome.object, packed.digest);
    if (outcome.status === 'DEPLOYED' && stable && fresh && fresh !== stable)
      outcome = await shipCanary(cfg, kd, outcome.object, stable, fresh, traffic ?? 0, progress);
    else if (stable && fresh === stable)
      progress.note(`nothing new to ship: revision ${stable} keeps all traffic`);
    progress.stop(outcome.failed);
    report(kd, label, outcome, fresh, progress.total());
  } finally {
    progress.stop();
  }
}

/** The deploy's last lines: where the new code stands, on stderr; its address on stdout; the exit status. */
function report(
  kd: KindInfo,
  label: string,
  outcome: Awaited<ReturnType<typeof waitFor>>,
  fresh: string | undefined,
  took: string,
) {
  const o = outcome.object;
  if (outcome.status !== 'DEPLOYED') {
    const { line, exitCode } = outcomeLine(kd, outcome);
    process.stderr.write(`${line}\n`);
    process.exitCode = outcome.status === 'DEACTIVATED' ? EXIT_NO_TRAFFIC : exitCode;
    return;
  }
  const at = addressOf(o, kd.kind);
  if (kd.kind === 'Job') {
    process.stderr.write(
      `${label} DEPLOYED in ${took}: revision ${o.activeRevision} runs the next executions (\`berth run job ${o.metadata.name}\`)\n`,
    );
    return;
  }
  const share = fresh ? shareOf(o, fresh) : 'all';
  const pct = o.spec?.revision?.canaryPercent ?? 0;
  if (share === 'none') {
    const pin = o.spec?.revision?.active;
    process.stderr.write(
      `${label} DEPLOYED in ${took}, but revision ${fresh} takes no traffic: ${pin ? `spec.revision.active pins ${pin}` : `revision ${o.activeRevision} serves`}.\n` +
        `  to send it all requests: ${promoteCommand(kd.kind, o.metadata.name, fresh!)}\n`,
    );
    process.exitCode = EXIT_NO_TRAFFIC;
  } else if (share === 'canary')
    process.stderr.write(
      `${label} DEPLOYED in ${took}: revision ${fresh} takes ${pct}% (canary), ${o.activeRevision} the rest\n` +
        `  to send it all requests: ${promoteCommand(kd.kind, o.metadata.name, fresh!)}\n`,
    );
  else if (share === 'active')
    process.stderr.write(
      `${label} DEPLOYED in ${took}: revision ${fresh} takes ${100 - pct}%, canary ${o.canaryRevision} the rest\n`,
    );
  else
    process.stderr.write(
      `${label} DEPLOYED in ${took}: revision ${fresh ?? o.activeRevision} takes all traffic\n`,
    );
  if (at) process.stdout.write(`${at}\n`);
}

export function registerDeploy(program: Command) {
  program
    .command('deploy [dir]')
    .description('build and deploy an agent, MCP server or job from a directory (berth.toml / blaxel.toml)')
    .option('--name <name>', 'object name (default: the manifest name, else the directory name)')
    .option('--kind <kind>', 'agent, function or job (default: the manifest type, else agent)')
    .option('--traffic <percent>', 'ship the new revision as a canary taking this share of requests (1-99)')
    .option('--memory <mb>', 'memory of each replica or task in MB (over the manifest)')
    .option('-e, --env <KEY=VALUE...>', 'environment variables (over those set on the server)')
    .option(
      '--volume <volume...>',
      'name:/path or name:/path:ro: mount a volume (replaces the volumes set on the server)',
    )
    .option('--no-wait', 'return once the code is uploaded')
    .action(deploy);
}
