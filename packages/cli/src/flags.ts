// The docker-run style flags several commands share, read into spec fields: `-e KEY=VALUE`, `--volume name:/path[:ro]`,
// `--port 3000[:public]`, `--memory <MB>`. A malformed value is refused here, naming the flag and its form.

export interface EnvVar {
  name: string;
  value: string;
}

export function parseEnvs(list: string[] = [], flag = '--env'): EnvVar[] {
  return list.map((kv) => {
    const i = kv.indexOf('=');
    if (i <= 0) throw new Error(`${flag} takes KEY=VALUE, got ${JSON.stringify(kv)}`);
    return { name: kv.slice(0, i), value: kv.slice(i + 1) };
  });
}

export interface VolumeFlag {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

/** `data:/data` or `data:/data:ro` (a volume of the workspace, mounted at an absolute path). */
export function parseVolumes(list: string[] = []): VolumeFlag[] {
  return list.map((v) => {
    const m = /^([^:]+):(\/[^:]*)(?::(ro|rw))?$/.exec(v);
    if (!m) throw new Error(`--volume takes name:/path or name:/path:ro, got ${JSON.stringify(v)}`);
    return { name: m[1], mountPath: m[2], ...(m[3] === 'ro' ? { readOnly: true } : {}) };
  });
}

export interface PortFlag {
  port: number;
  public: boolean;
}

/** `3000` (reachable with a credential) or `3000:public` (a public preview too). */
export function parsePorts(list: string[] = []): PortFlag[] {
  return list.map((p) => {
    const m = /^(\d{1,5})(?::(public|private))?$/.exec(p);
    const port = m ? Number(m[1]) : 0;
    if (!m || port < 1 || port > 65535)
      throw new Error(`--port takes a port from 1 to 65535, optionally :public, got ${JSON.stringify(p)}`);
    return { port, public: m[2] === 'public' };
  });
}

export function parseMemory(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const mb = Number(v);
  if (!Number.isInteger(mb) || mb <= 0) throw new Error(`--memory takes a whole number of MB, got ${v}`);
  return mb;
}

/** `-e` values over the ones already set, by name (a deploy keeps what was set on the server unless told). */
export function mergeEnvs(before: EnvVar[] | undefined, flags: EnvVar[]): EnvVar[] | undefined {
  if (!flags.length) return before;
  const byName = new Map((before ?? []).map((e) => [e.name, e]));
  for (const e of flags) byName.set(e.name, e);
  return [...byName.values()];
}
