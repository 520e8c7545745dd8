// Wire shapes of the sandbox API (docs/compat.md "Sandbox API"), shared by the daemon, its MCP tools and
// its callers.
// No Node imports: the SDK and CLI may import this file as is.

export type ProcessStatus = 'running' | 'completed' | 'failed' | 'killed' | 'stopped';

/** Body of POST /process. `timeout` is in seconds (0 = none); `stdin: true` keeps a pipe open. */
export interface ProcessRequest {
  command: string;
  name?: string;
  workingDir?: string;
  env?: Record<string, string>;
  waitForCompletion?: boolean;
  timeout?: number;
  waitForPorts?: number[];
  restartOnFailure?: boolean;
  maxRestarts?: number;
  keepAlive?: boolean;
  /** true: a writable pipe fed by POST /process/{id}/stdin; a string: written once, then closed. */
  stdin?: boolean | string;
}

/** The process as every process route answers it; `pid` is the first OS pid, as a string. */
export interface ProcessJson {
  pid: string;
  name: string;
  command: string;
  status: ProcessStatus;
  exitCode: number;
  /** HTTP-date, as the service's own daemon writes it ("Wed, 01 Jan 2025 12:00:00 GMT"). */
  startedAt: string;
  /** HTTP-date, or "" while running. */
  completedAt: string;
  workingDir: string;
  logs: string;
  stdout: string;
  stderr: string;
  restartCount: number;
  restartOnFailure: boolean;
  maxRestarts: number;
  keepAlive: boolean;
  stdin: boolean;
}

export interface ProcessLogs {
  logs: string;
  stdout: string;
  stderr: string;
}

/** One line of the NDJSON answer of POST /process with `Accept: text/event-stream`. */
export type ExecStreamEvent =
  | { type: 'stdout' | 'stderr'; data: string }
  | { type: 'keepalive'; data: string }
  | { type: 'result'; data: string };

export interface FileEntry {
  name: string;
  path: string;
  size: number;
  /** Octal permission bits, e.g. "644". */
  permissions: string;
  owner: string;
  group: string;
  /** ISO 8601. */
  lastModified: string;
}

export interface FileWithContent extends FileEntry {
  content: string;
}

export interface Subdirectory {
  name: string;
  path: string;
  /** Only in tree answers: the subdirectory's own listing. */
  files?: FileEntry[];
  subdirectories?: Subdirectory[];
}

export interface DirectoryJson {
  name: string;
  path: string;
  files: FileEntry[];
  subdirectories: Subdirectory[];
}

export interface FileRequest {
  content?: string;
  isDirectory?: boolean;
  permissions?: string;
}

export interface TreeRequest {
  files?: Record<string, string>;
}

export interface SuccessResponse {
  message: string;
  path?: string;
}

export interface ErrorResponse {
  error: string;
}

export type EntryType = 'file' | 'directory';

export interface FindResponse {
  matches: { path: string; type: EntryType }[];
  total: number;
}

export interface FuzzySearchResponse {
  matches: { path: string; score: number; type: EntryType }[];
  total: number;
}

export interface ContentSearchMatch {
  path: string;
  line: number;
  column: number;
  text: string;
  context?: string;
}

export interface ContentSearchResponse {
  matches: ContentSearchMatch[];
  query: string;
  total: number;
}

export type WatchOp = 'CREATE' | 'WRITE' | 'REMOVE' | 'RENAME' | 'CHMOD';

/** One NDJSON line of GET /watch/filesystem/{path}: `name` is the base name, `path` its directory. */
export interface FileEvent {
  op: WatchOp;
  name: string;
  path: string;
  error: string | null;
}

export interface MultipartInitiateResponse {
  uploadId: string;
  path: string;
}

export interface MultipartPartResponse {
  partNumber: number;
  etag: string;
  size: number;
}

export interface MultipartCompleteRequest {
  parts?: { partNumber?: number; etag?: string }[];
}

export interface PortInfo {
  protocol: 'tcp' | 'tcp6';
  localAddr: string;
  localPort: number;
  state: 'LISTEN';
  pid: number;
}

/** The service's `UpgradeStatus`: how the last POST /upgrade went. */
export interface UpgradeStatus {
  status: 'idle' | 'running' | 'completed' | 'failed';
  /** `none`, `replace` (loading the new code) or `completed`. */
  step: string;
  /** The daemon version upgraded to (the server's). */
  version: string;
  lastAttempt?: string;
  error?: string;
}

export interface HealthResponse {
  status: 'ok';
  version: string;
  startedAt: string;
  /** Go-duration style, e.g. "93.2s", as the service's own daemon reports it. */
  uptime: string;
  uptimeSeconds: number;
  /** Running processes started with keepAlive: the host must not put the sandbox on standby while > 0. */
  activeKeepAlive: number;
  runningProcesses: number;
  arch: string;
  os: string;
  /** Upgrades completed since the daemon started (POST /upgrade), as the service's daemon counts them. */
  upgradeCount: number;
  lastUpgrade: UpgradeStatus;
  /** When the daemon's code was last replaced in place (POST /upgrade); absent before any. */
  upgradedAt?: string;
}

/** Text frames of GET /terminal/ws, client → daemon (binary frames are keystrokes). */
export type TerminalClientMessage =
  | { type: 'input'; data: string }
  | { type: 'resize'; cols: number; rows: number };

/** The text frame the daemon sends when the shell ends, before it closes the socket (output is binary frames). */
export interface TerminalExitMessage {
  type: 'exit';
  exitCode: number;
}

/** A line of the text log stream and of the watch stream that carries no data. */
export const KEEPALIVE_LINE = '[keepalive]\n';

export type Check<T> = { ok: true; value: T } | { ok: false; reason: string };

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validates a POST /process body; unknown fields are ignored (clients send newer fields than we know). */
export function checkProcessRequest(body: unknown): Check<ProcessRequest> {
  if (!isRecord(body)) return { ok: false, reason: 'body must be a JSON object' };
  const b = body;
  if (typeof b.command !== 'string' || b.command.trim() === '')
    return { ok: false, reason: 'command is required' };
  for (const key of ['name', 'workingDir'] as const) {
    if (b[key] !== undefined && b[key] !== null && typeof b[key] !== 'string')
      return { ok: false, reason: `${key} must be a string` };
  }
  for (const key of ['waitForCompletion', 'restartOnFailure', 'keepAlive'] as const) {
    if (b[key] !== undefined && b[key] !== null && typeof b[key] !== 'boolean')
      return { ok: false, reason: `${key} must be a boolean` };
  }
  for (const key of ['timeout', 'maxRestarts'] as const) {
    if (b[key] !== undefined && b[key] !== null && (typeof b[key] !== 'number' || !Number.isFinite(b[key])))
      return { ok: false, reason: `${key} must be a number` };
  }
  if (typeof b.timeout === 'number' && b.timeout < 0) return { ok: false, reason: 'timeout must be >= 0' };
  if (b.env !== undefined && b.env !== null) {
    if (!isRecord(b.env)) return { ok: false, reason: 'env must be an object of strings' };
    for (const [k, v] of Object.entries(b.env)) {
      if (typeof v !== 'string') return { ok: false, reason: `env.${k} must be a string` };
    }
  }
  if (b.waitForPorts !== undefined && b.waitForPorts !== null) {
    const ports = b.waitForPorts;
    if (!Array.isArray(ports) || ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65535))
      return { ok: false, reason: 'waitForPorts must be an array of ports (1-65535)' };
  }
  if (
    b.stdin !== undefined &&
    b.stdin !== null &&
    typeof b.stdin !== 'boolean' &&
    typeof b.stdin !== 'string'
  )
    return { ok: false, reason: 'stdin must be a boolean or a string' };
  const opt = <T>(v: unknown) => (v === null ? undefined : (v as T | undefined));
  return {
    ok: true,
    value: {
      command: b.command,
      name: opt<string>(b.name) || undefined,
      workingDir: opt<string>(b.workingDir) || undefined,
      env: opt<Record<string, string>>(b.env),
      waitForCompletion: opt<boolean>(b.waitForCompletion),
      timeout: opt<number>(b.timeout),
      waitForPorts: opt<number[]>(b.waitForPorts),
      restartOnFailure: opt<boolean>(b.restartOnFailure),
      maxRestarts: opt<number>(b.maxRestarts),
      keepAlive: opt<boolean>(b.keepAlive),
      stdin: opt<boolean | string>(b.stdin),
    },
  };
}

/** Parses "0644" / "644" / "755" into mode bits. */
export function parsePermissions(value: unknown): Check<number | undefined> {
  if (value === undefined || value === null || value === '') return { ok: true, value: undefined };
  if (typeof value !== 'string' || !/^0?[0-7]{3,4}$/.test(value.trim()))
    return { ok: false, reason: `invalid permissions format '${String(value)}'` };
  return { ok: true, value: Number.parseInt(value.trim(), 8) };
}
