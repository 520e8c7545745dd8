// Dockerfile builds (decision 051): each stage starts from an image of the workspace (pulled as a sandbox's would be),
// `scratch`, or an earlier stage; each RUN runs in a build sandbox of its own whose root is the stage so far (the
// image with the stage's layers stacked over it, writable on top), under the build's network policy, and what it
// changed is read back as the next layer; COPY and ADD make their layer on the host from the context or another
// stage. Every layer is packed as a real OCI layer into the image store and kept in the workspace's layer cache by its
// step's key; the target stage is installed under the build's name in the workspace (charged to its image quota).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import { type EgressPolicy, SCRATCH_IMAGE } from '../../runtime/driver.js';
import type { Instances } from '../../runtime/instances.js';
import type { BuildOwner } from '../sandbox-step.js';
import { ImageError } from '../../runtime/images/errors.js';
import { type HeldImage, ImageStore } from '../../runtime/images/image-store.js';
import { imageUser } from '../../runtime/images/image-user.js';
import { packLayer } from '../../runtime/images/layer-pack.js';
import {
  type Descriptor,
  hostArchitecture,
  type ImageConfig,
  ociConfigBytes,
} from '../../runtime/images/manifest.js';
import { EMPTY_DIR } from '../../runtime/linux/host.js';
import { withMerged } from '../../runtime/linux/merged.js';
import { ContextError, resolveIn } from './context.js';
import { copyInputs, copyLayer, mkdirLayerPath } from './copy.js';
import { type CachedLayer, LayerCache } from './layer-cache.js';
import {
  type CommandForm,
  DockerfileError,
  type ParsedDockerfile,
  parseDockerfile,
  type Stage,
  type Step,
} from './parse.js';
import { runInSandbox } from './run-step.js';
import { expandWord, expandWords, type Vars, WordError } from './words.js';
import { keyOf } from './keys.js';

export interface ImageBuildDeps {
  dataDir: string;
  /** Where RUN steps run (each an instance owned by what the build is for). */
  instances: Instances;
  images: ImageStore;
}

export interface ImageBuildRequest {
  workspace: string;
  /** The unpacked context; .dockerignore is applied to it by the caller (context.ts applyDockerignore). */
  contextDir: string;
  /** The Dockerfile's text. */
  dockerfile: string;
  /** The name the result is installed under in the workspace. */
  name: string;
  buildArgs?: Record<string, string>;
  /** The stage to build (default: the last). */
  target?: string;
  /** Run every step again, keeping nothing of the cache. */
  noCache?: boolean;
  /** The RUN steps' network policy (default: the sandboxes' default network). */
  egress?: EgressPolicy;
  /** What the build is for, the owner of its RUN steps' instances (default: the image of `name`). */
  owner?: BuildOwner;
}

/** A build failed: the instruction that failed (its line and text) and the end of its output, for the user. */
export class ImageBuildError extends Error {
  override name = 'ImageBuildError';
  constructor(
    message: string,
    readonly step?: { line: number; text: string },
  ) {
    super(message);
  }
}

interface Base {
  /** Image id, or SCRATCH_IMAGE. */
  id: string;
  rootfs: string;
  layers: Descriptor[];
  diffIds: string[];
  history: unknown[];
}

/** A stage as far as it has been built. */
export interface StageState {
  base: Base;
  /** The stage's own layers, bottom first. */
  layers: CachedLayer[];
  config: ImageConfig;
  /** The key of everything so far: the next step's parent. */
  key: string;
  history: Array<{ created_by: string; empty_layer?: boolean }>;
  /** ARGs declared in the stage, with their values. */
  args: Map<string, string>;
}

/** The lowers of a stage, topmost first: its layers, then its image's root. */
export const lowersOf = (s: StageState) => [...s.layers.map((l) => l.dir).reverse(), s.base.rootfs];

const envMap = (env: string[]) =>
  new Map(
    env.map((kv) => [kv.slice(0, Math.max(0, kv.indexOf('='))), kv.slice(kv.indexOf('=') + 1)] as const),
  );

/** Variables a stage's instructions expand: its ARGs, then its ENV over them (as Docker orders them). */
function varsOf(s: StageState): Map<string, string> {
  return new Map([...s.args, ...envMap(s.config.env)]);
}

function setEnv(env: string[], name: string, value: string): string[] {
  return [...env.filter((kv) => !kv.startsWith(`${name}=`)), `${name}=${value}`];
}

const commandWords = (c: CommandForm) => ('exec' in c ? c.exec : ['/bin/sh', '-c', c.shell]);

export class ImageBuild {
  private readonly parsed: ParsedDockerfile;
  private readonly cache: LayerCache;
  private readonly scratch: string;
  private readonly stages = new Map<number, Promise<StageState>>();
  private readonly globals: Map<string, string>;
  private readonly usedArgs = new Set<string>();
  private stepNo = 0;
  private readonly totalSteps: number;

  constructor(
    private readonly deps: ImageBuildDeps,
    private readonly req: ImageBuildRequest,
    private readonly log: (text: string) => void,
    private readonly signal: AbortSignal,
  ) {
    this.parsed = parseDockerfile(req.dockerfile);
    for (const n of this.parsed.notes) log(`note: ${n}\n`);
    this.cache = new LayerCache(deps.dataDir, req.workspace);
    this.scratch = this.cache.scratch(randomBytes(6).toString('hex'));
    this.globals = new Map();
    for (const a of this.parsed.globalArgs) {
      const v =
        req.buildArgs?.[a.name] ??
        (a.value !== undefined ? this.expand(a.value, this.globals, a) : undefined);
      if (v !== undefined) this.globals.set(a.name, v);
      if (req.buildArgs?.[a.name] !== undefined) this.usedArgs.add(a.name);
    }
    this.totalSteps = this.parsed.stages.reduce((n, s) => n + 1 + s.steps.length, 0);
  }

  private expand(text: string, vars: Vars, at: { line: number }, many = false): string & string[] {
    try {
      return (
        many ? expandWords(text, vars, this.parsed.escape) : expandWord(text, vars, this.parsed.escape)
      ) as any;
    } catch (e) {
      if (e instanceof WordError) throw new DockerfileError(e.message, at.line);
      throw e;
    }
  }

  /** Builds the target stage and installs it under the request's name; the image as the workspace holds it. */
  async run(): Promise<HeldImage> {
    try {
      const target = this.req.target
        ? this.parsed.stages.find((s) => s.name === this.req.target?.toLowerCase())
        : this.parsed.stages.at(-1);
      if (!target) throw new DockerfileError(`no stage named ${this.req.target}`);
      const state = await this.stage(target.index);
      for (const k of Object.keys(this.req.buildArgs ?? {}))
        if (!this.usedArgs.has(k)) this.log(`note: the build argument ${k} was not consumed by any ARG\n`);
      return await this.install(state);
    } finally {
      rmSync(this.scratch, { recursive: true, force: true });
    }
  }

  private stage(index: number): Promise<StageState> {
    let p = this.stages.get(index);
    if (!p) {
      p = this.buildStage(this.parsed.stages[index]);
      this.stages.set(index, p);
    }
    return p;
  }

  /** An earlier stage by name or index, or undefined when `ref` names none. */
  private stageRef(ref: string, before: number): Stage | undefined {
    const byName = this.parsed.stages.find((s) => s.name === ref.toLowerCase() && s.index < before);
    if (byName) return byName;
    if (/^\d+$/.test(ref) && Number(ref) < before) return this.parsed.stages[Number(ref)];
    return undefined;
  }

  private say(step: { text: string }) {
    this.stepNo++;
    this.log(`Step ${this.stepNo}/${this.totalSteps} : ${step.text}\n`);
  }

  private async buildStage(stage: Stage): Promise<StageState> {
    this.say(stage);
    const from = this.expand(stage.from, this.globals, stage);
    const parent = this.stageRef(from, stage.index);
    let state: StageState;
    if (parent) {
      const p = await this.stage(parent.index);
      state = { ...p, layers: [...p.layers], history: [...p.history], args: new Map() };
    } else {
      const base = await this.baseImage(from, stage);
      state = {
        base,
        layers: [],
        config: base.id === SCRATCH_IMAGE ? { env: [] } : (this.deps.images.get(base.id) as HeldImage).config,
        key: keyOf(['from', base.id]),
        history: [],
        args: new Map(),
      };
    }
    this.log(
      ` ---> ${parent ? `stage ${parent.name ?? parent.index}` : from === 'scratch' ? 'scratch' : short(state.base.id)}\n`,
    );
    for (const s of stage.steps) {
      this.signal.throwIfAborted();
      this.say(s);
      try {
        state = await this.step(state, s, stage);
      } catch (e) {
        if (e instanceof ImageBuildError || e instanceof DockerfileError) throw e;
        if (e instanceof ContextError || e instanceof ImageError)
          throw new ImageBuildError(`${s.text}: ${e.message}`, s);
        throw e;
      }
    }
    return state;
  }

  private async baseImage(name: string, stage: Stage): Promise<Base> {
    if (name === 'scratch')
      return { id: SCRATCH_IMAGE, rootfs: EMPTY_DIR, layers: [], diffIds: [], history: [] };
    let image: HeldImage;
    try {
      image = await this.deps.images.resolve(this.req.workspace, name);
    } catch (e) {
      if (e instanceof ImageError) throw new ImageBuildError(`FROM ${name}: ${e.message}`, stage);
      throw e;
    }
    const cfgPath = this.deps.images.blobs.path(image.id);
    if (!existsSync(cfgPath))
      throw new ImageBuildError(
        `FROM ${name}: the image's config is no longer in the store: pull it again`,
        stage,
      );
    const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
    const diffIds: string[] = Array.isArray(cfg?.rootfs?.diff_ids) ? cfg.rootfs.diff_ids : [];
    if (diffIds.length !== image.layers.length)
      throw new ImageBuildError(
        `FROM ${name}: the image's config does not list its layers (diff_ids)`,
        stage,
      );
    return {
      id: image.id,
      rootfs: image.rootfs,
      layers: image.layers,
      diffIds,
      history: Array.isArray(cfg.history) ? cfg.history : [],
    };
  }

  /** A step that only changes the config: the key moves on, no layer. */
  private configStep(state: StageState, s: Step, config: ImageConfig, expanded: string): StageState {
    return {
      ...state,
      config,
      key: keyOf([state.key, s.kind, expanded]),
      history: [...state.history, { created_by: s.text, empty_layer: true }],
    };
  }

  private async step(state: StageState, s: Step, stage: Stage): Promise<StageState> {
    const vars = varsOf(state);
    switch (s.kind) {
      case 'ENV': {
        let env = state.config.env;
        const scope = new Map(vars);
        for (const [k, raw] of s.pairs) {
          const v = this.expand(raw, scope, s);
          env = setEnv(env, k, v);
          scope.set(k, v);
        }
        return this.configStep(state, s, { ...state.config, env }, env.join('\0'));
      }
      case 'ARG': {
        const given = this.req.buildArgs?.[s.name];
        if (given !== undefined) this.usedArgs.add(s.name);
        const v = given ?? (s.value !== undefined ? this.expand(s.value, vars, s) : this.globals.get(s.name));
        const args = new Map(state.args);
        if (v !== undefined) args.set(s.name, v);
        return { ...this.configStep(state, s, state.config, `${s.name}=${v ?? ''}`), args };
      }
      case 'LABEL':
      case 'MAINTAINER': {
        const labels = { ...state.config.labels };
        if (s.kind === 'MAINTAINER') labels.maintainer = s.value;
        else for (const [k, raw] of s.pairs) labels[this.expand(k, vars, s)] = this.expand(raw, vars, s);
        return this.configStep(state, s, { ...state.config, labels }, JSON.stringify(labels));
      }
      case 'EXPOSE': {
        const ports = this.expand(s.ports, vars, s, true).map((p) => (p.includes('/') ? p : `${p}/tcp`));
        for (const p of ports)
          if (!/^\d{1,5}(-\d{1,5})?\/(tcp|udp|sctp)$/.test(p))
            throw new DockerfileError(`EXPOSE ${p} is not a port`, s.line);
        const all = [...new Set([...(state.config.exposedPorts ?? []), ...ports])].sort();
        return this.configStep(state, s, { ...state.config, exposedPorts: all }, all.join(','));
      }
      case 'CMD':
        return this.configStep(
          state,
          s,
          { ...state.config, cmd: commandWords(s.command) },
          JSON.stringify(s.command),
        );
      case 'ENTRYPOINT': {
        // As Docker: a new ENTRYPOINT drops the CMD inherited so far.
        const config = { ...state.config, entrypoint: commandWords(s.command), cmd: undefined };
        return this.configStep(state, s, config, JSON.stringify(s.command));
      }
      case 'USER': {
        const user = this.expand(s.value, vars, s);
        return this.configStep(state, s, { ...state.config, user }, user);
      }
      case 'WORKDIR':
        return this.workdir(
          state,
          s,
          posix.resolve(state.config.workingDir ?? '/', this.expand(s.value, vars, s)),
        );
      case 'RUN':
        return this.runStep(state, s);
      case 'COPY':
      case 'ADD':
        return this.copyStep(state, s, stage);
    }
  }

  /** Adds (or takes from the cache) the layer of a step; `make` fills an empty directory with it. */
  private async layerStep(
    state: StageState,
    s: Step,
    key: string,
    make: (dir: string) => Promise<void>,
    patch: Partial<ImageConfig> = {},
  ): Promise<StageState> {
    let layer = this.req.noCache ? undefined : this.cache.get(key);
    if (layer) {
      this.log(' ---> Using cache\n');
      if (!this.deps.images.blobs.has(layer.packed.digest)) {
        // The store collected the blob (no image named it any more): the same directory packs to the same bytes.
        const again = await packLayer(
          layer.dir,
          this.deps.images.blobs,
          this.scratch,
          `image ${this.req.name}`,
        );
        if (again.digest !== layer.packed.digest)
          layer = this.cache.put(key, this.cache.scratch(`${key}-x`), again);
      }
    } else {
      const dir = join(this.scratch, `layer-${this.stepNo}`);
      await make(dir);
      const packed = await packLayer(dir, this.deps.images.blobs, this.scratch, `image ${this.req.name}`);
      layer = this.cache.put(key, dir, packed);
      this.log(` ---> ${short(packed.digest)}\n`);
    }
    return {
      ...state,
      config: { ...state.config, ...patch },
      layers: [...state.layers, layer],
      key,
      history: [...state.history, { created_by: s.text }],
    };
  }

  private async workdir(state: StageState, s: Step, path: string): Promise<StageState> {
    const config = { ...state.config, workingDir: path };
    const exists = await withMerged(this.scratch, lowersOf(state), async (root) =>
      existsSync(join(root, resolveIn(root, path))),
    );
    if (exists) return this.configStep(state, s, config, path);
    return this.layerStep(
      state,
      s,
      keyOf([state.key, 'WORKDIR', path]),
      async (dir) => {
        await withMerged(this.scratch, lowersOf(state), async (root) => mkdirLayerPath(root, dir, path));
      },
      { workingDir: path },
    );
  }

  private async runStep(state: StageState, s: Step & { kind: 'RUN' }): Promise<StageState> {
    const vars = varsOf(state);
    const { uid, gid, home } = await this.userOf(state, s);
    const env: Record<string, string> = Object.fromEntries(vars);
    env.HOME ??= home;
    if (!env.PATH) env.PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
    const workingDir = state.config.workingDir ?? '/';
    const key = keyOf([
      state.key,
      'RUN',
      JSON.stringify(s.command),
      JSON.stringify([...Object.entries(env)].sort()),
      `${uid}:${gid}`,
      workingDir,
      JSON.stringify(this.req.egress ?? null),
    ]);
    return this.layerStep(state, s, key, async (dir) => {
      const r = await runInSandbox(this.deps, {
        image: state.base.id,
        layers: lowersOf(state).slice(0, -1),
        user: `${uid}:${gid}`,
        owner: {
          ...(this.req.owner ?? { kind: 'Image', name: this.req.name }),
          workspace: this.req.workspace,
          role: 'build',
        },
        command: s.command,
        env,
        workingDir,
        egress: this.req.egress,
        dest: dir,
        onOutput: this.log,
        signal: this.signal,
      });
      if (!r.ok) throw new ImageBuildError(`${s.text}: ${r.reason}`, s);
    });
  }

  /** The numeric user a RUN runs as (the stage's USER, looked up in its /etc/passwd) and its home. */
  private async userOf(state: StageState, s: Step): Promise<{ uid: number; gid: number; home: string }> {
    const user = state.config.user;
    if (!user || /^\d+(:\d+)?$/.test(user)) {
      const [u, g] = (user ?? '0').split(':').map(Number);
      return { uid: u, gid: g ?? u, home: u === 0 ? '/root' : '/' };
    }
    return withMerged(this.scratch, lowersOf(state), async (root) => {
      try {
        const { uid, gid } = imageUser(root, user, `USER ${user}`);
        const line = safeRead(join(root, resolveIn(root, '/etc/passwd')))
          .split('\n')
          .map((l) => l.split(':'))
          .find((f) => f[0] === user.split(':')[0]);
        return { uid, gid, home: line?.[5] || '/' };
      } catch (e) {
        if (e instanceof ImageError) throw new ImageBuildError(`${s.text}: ${e.message}`, s);
        throw e;
      }
    });
  }

  private async copyStep(
    state: StageState,
    s: Step & { kind: 'COPY' | 'ADD' },
    stage: Stage,
  ): Promise<StageState> {
    const vars = varsOf(state);
    if (s.chown)
      this.log(
        `note: --chown=${s.chown} is not kept: every file of a Berth image belongs to the sandbox's user\n`,
      );
    const sources = s.sources.map((x) => this.expand(x, vars, s));
    const dest =
      posix.resolve(state.config.workingDir ?? '/', this.expand(s.dest, vars, s)) +
      (s.dest.endsWith('/') ? '/' : '');
    for (const src of sources)
      if (/^[a-z][a-z0-9+.-]*:\/\//i.test(src) || src.startsWith('git@'))
        throw new DockerfileError(
          `${s.kind} from a URL (${src}) is not supported: put the file in the context, or fetch it in a RUN under the build's network policy`,
          s.line,
        );
    let from: { root: string; key: string; lowers?: string[] } = {
      root: this.req.contextDir,
      key: 'context',
    };
    if (s.kind === 'COPY' && s.from) {
      const name = this.expand(s.from, vars, s);
      const other = this.stageRef(name, stage.index);
      if (other) {
        const o = await this.stage(other.index);
        from = { root: '', key: o.key, lowers: lowersOf(o) };
      } else {
        const img = await this.baseImage(name, stage);
        from = { root: img.rootfs, key: img.id };
      }
    }
    const withSource = <T>(fn: (root: string) => Promise<T>) =>
      from.lowers ? withMerged(this.scratch, from.lowers, fn) : fn(from.root);
    const inputs = await withSource((root) =>
      copyInputs(root, sources, `${s.kind} ${sources.join(' ')}`, from.lowers ? undefined : 'context'),
    );
    const key = keyOf([state.key, s.kind, from.key, inputs, dest, s.chmod ?? '']);
    return this.layerStep(state, s, key, (dir) =>
      withSource((srcRoot) =>
        withMerged(this.scratch, lowersOf(state), (root) =>
          copyLayer({ kind: s.kind, srcRoot, sources, dest, chmod: s.chmod, root, layer: dir, what: s.text }),
        ),
      ),
    );
  }

  /** The stage as an OCI image: its config and manifest into the blob store, installed under the build's name. */
  private async install(state: StageState): Promise<HeldImage> {
    const arch = hostArchitecture();
    const layers: Descriptor[] = [
      ...state.base.layers,
      ...state.layers.map((l) => ({
        mediaType: l.packed.mediaType,
        digest: l.packed.digest,
        size: l.packed.size,
      })),
    ];
    const diffIds = [...state.base.diffIds, ...state.layers.map((l) => l.packed.diffId)];
    const history = [...(state.base.history as never[]), ...state.history];
    const cfg = ociConfigBytes(state.config, arch, diffIds, history);
    const cfgDigest = `sha256:${createHash('sha256').update(cfg).digest('hex')}`;
    const { images } = this.deps;
    const { canonical } = ImageStore.parse(this.req.name);
    return images.writing(async () => {
      if (!images.blobs.has(cfgDigest))
        await images.blobs.write(Readable.from([cfg]), cfgDigest, cfg.length, `image ${canonical}`);
      for (const l of layers)
        if (!images.blobs.has(l.digest))
          throw new ImageBuildError(
            `a layer of the base image (${short(l.digest)}) is no longer in the store: pull it again`,
          );
      const manifest = {
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: cfgDigest,
          size: cfg.length,
        },
        layers,
      };
      const mBytes = Buffer.from(JSON.stringify(manifest));
      const mDigest = `sha256:${createHash('sha256').update(mBytes).digest('hex')}`;
      if (!images.blobs.has(mDigest))
        await images.blobs.write(Readable.from([mBytes]), mDigest, mBytes.length, `image ${canonical}`);
      const held = await images.install({
        workspace: this.req.workspace,
        canonical,
        digest: mDigest,
        manifest,
        config: state.config,
        layerFiles: layers.map((l) => images.blobs.path(l.digest)),
        size: layers.reduce((n, l) => n + l.size, 0),
        what: `image ${canonical}`,
      });
      this.log(`Successfully built ${short(held.id)}\nSuccessfully tagged ${canonical}\n`);
      return held;
    });
  }
}

const short = (digest: string) => digest.replace(/^sha256:/, '').slice(0, 12);

function safeRead(p: string): string {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

/** Runs a build; throws ImageBuildError or DockerfileError (the user's), anything else is the server's. */
export function buildImage(
  deps: ImageBuildDeps,
  req: ImageBuildRequest,
  log: (text: string) => void,
  signal: AbortSignal,
): Promise<HeldImage> {
  return new ImageBuild(deps, req, log, signal).run();
}
