// Access tokens of OAuth2 connections (decision 049): the refresh token turned into an access token, kept fresh for
// the connections a running workload holds, the refresh token the provider rotates stored sealed before anything
// uses the new access token, and a grant the provider refuses recorded with the words of §7 until the connection
// changes. One refresh at a time per connection, over every server of a cluster (decision 101: a claim in the token
// record); every server holding the connection writes the token another refreshed into its own file. Tokens never
// reach a log line, an event or an answer.
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { K } from '../auth/records.js';
import { NAME_PATTERN } from '../kinds/common.js';
import {
  CONNECTION_TOKEN_KIND,
  integrationConnection as connectionKind,
} from '../kinds/integration-connection.js';
import {
  CLIENT_ID,
  CLIENT_SECRET,
  oauth2Config,
  RECONNECT_ADVICE,
  REFRESH_FAILED,
  REFRESH_TOKEN,
} from '../kinds/oauth2.js';
import type { Outbound } from '../outbound/index.js';
import type { Resources } from '../store/resources.js';
import { type ResourceKey, StoreError, type StoredObject, type WriteOp } from '../store/store.js';
import { GrantRefused, requestGrant, TOKEN_REQUEST_TIMEOUT_MS } from './token-client.js';
import { clearTokenFile, oauthRoot, removeTokenDir, tokenDir, writeTokenFile } from './token-files.js';

const LABEL = new RegExp(NAME_PATTERN);

/** The name of a connection's token record (one per connection, its parent the connection's name). */
const RECORD_NAME = 'oauth2';
/** An access token whose provider gave no lifetime is taken to live this long (RFC 6749 leaves it to the docs). */
export const DEFAULT_TOKEN_LIFETIME_S = 3600;
/**
 * A held token is refreshed when this share of its lifetime is left: long enough that a slow provider or one
 * retry still lands before expiry, short enough not to refresh far more often than the provider expects.
 */
export const REFRESH_AHEAD_SHARE = 0.2;
/** ...but never earlier than this before expiry (an hour-long token is refreshed 5 minutes ahead)... */
export const REFRESH_AHEAD_MAX_MS = 5 * 60_000;
/** ...and never later than this (clocks and the request itself take time). */
export const REFRESH_AHEAD_MIN_MS = 1_000;
/** After a failure the provider may be down: wait this long, doubling up to the cap, before trying again. */
export const RETRY_FIRST_MS = 2_000;
export const RETRY_MAX_MS = 60_000;
/** A 401 from the provider refreshes once; a token refreshed this recently is not refreshed again for one. */
export const UNAUTHORIZED_QUIET_MS = 5_000;
/**
 * How long a server's claim to refresh a connection keeps the others from refreshing it: past the token request's
 * own timeout, so a claim lapses only once its refresh can no longer reach the provider (or its server died).
 */
export const REFRESH_CLAIM_MS = TOKEN_REQUEST_TIMEOUT_MS + 5_000;
/** How often a server waiting for another's refresh reads the record again. */
const CLAIM_POLL_MS = 50;
/** Times a server waits for other servers' refreshes in one ask before it reports a transient failure. */
const CLAIM_WAITS = 3;

/** A connection's grant cannot be refreshed: the user must connect again (§7). Message starts with REFRESH_FAILED. */
export class ConnectionTokenFailed extends Error {
  override name = 'ConnectionTokenFailed';
}

/** The record beside a connection: everything sealed but times. */
interface TokenRecord {
  accessToken?: string;
  issuedAt?: number;
  expiresAt?: number;
  scope?: string;
  /** The refresh token the provider rotated to, sealed; it replaces the spec's while `origin` matches. */
  refreshToken?: string;
  /** sha256 of the spec's REFRESH_TOKEN the record follows: a connection given a new one starts afresh. */
  origin?: string;
  rotations?: number;
  lastRefreshAt?: number;
  /** The provider's refusal and the connection generation it was made for: a new generation tries again. */
  failure?: { message: string; generation: number };
  /** A server refreshing now (its ConnectionTokens' id), until when: the others wait for its outcome. */
  claim?: { by: string; until: number };
}

export interface AccessToken {
  accessToken: string;
  expiresAt: number;
}

export interface ConnectionTokensDeps {
  resources: Resources;
  outbound: Pick<Outbound, 'fetch'>;
  dataDir: string;
  logger?: Logger;
  now?: () => number;
  /** REFRESH_CLAIM_MS unless given (tests). */
  claimMs?: number;
}

const keyString = (workspace: string, name: string) => `${workspace}/${name}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export class ConnectionTokens {
  private readonly now: () => number;
  /** This server's name in the records' refresh claims. */
  private readonly id = randomUUID();
  /** The sealed access token last written into each held connection's file here: an unchanged one is not rewritten. */
  private readonly written = new Map<string, string>();
  /** One refresh (or read) in flight per connection: concurrent askers share it. */
  private readonly inflight = new Map<string, Promise<AccessToken>>();
  /** Holder (a workload key) → the connections it holds. */
  private readonly holders = new Map<string, Set<string>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly retryDelay = new Map<string, number>();
  private unwatch?: () => void;
  private closed = false;

  constructor(private readonly deps: ConnectionTokensDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Follows the connections' changes: a replaced one is refreshed anew when held, a deleted one forgotten. */
  start(): void {
    this.unwatch = this.deps.resources.store.watch((c) => {
      // A deleted workspace's tokens go with it (decision 043).
      if (c.type === 'DELETED' && c.object.kind === K.workspace) {
        if (LABEL.test(c.object.name)) removeTokenDir(join(oauthRoot(this.deps.dataDir), c.object.name));
        return;
      }
      if (c.object.kind === CONNECTION_TOKEN_KIND) {
        if (c.type !== 'DELETED') this.follow(c.object);
        return;
      }
      if (c.object.kind !== connectionKind.kind) return;
      const k = keyString(c.object.workspace, c.object.name);
      if (c.type === 'DELETED') {
        this.unschedule(k);
        this.written.delete(k);
        for (const held of this.holders.values()) held.delete(k);
        try {
          removeTokenDir(tokenDir(this.deps.dataDir, c.object.workspace, c.object.name));
        } catch {}
        return;
      }
      if (this.isHeld(k) && c.type === 'MODIFIED' && this.specChanged(c.object))
        this.schedule(c.object.workspace, c.object.name, 0);
    });
  }

  close(): void {
    this.closed = true;
    this.unwatch?.();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** The host directory of a connection's token file (mounted read-only into the replicas that hold it). */
  dirOf(workspace: string, name: string): string {
    return tokenDir(this.deps.dataDir, workspace, name);
  }

  /**
   * A valid access token of the connection: the one held while it is fresh, else a refreshed one. Throws
   * ConnectionTokenFailed when the provider refused the grant (until the connection changes), and the transient
   * error when the provider cannot be reached and no valid token is held.
   */
  token(workspace: string, name: string, force = false): Promise<AccessToken> {
    const k = keyString(workspace, name);
    const running = this.inflight.get(k);
    if (running) return running;
    const p = this.obtain(workspace, name, force).finally(() => this.inflight.delete(k));
    this.inflight.set(k, p);
    return p;
  }

  /**
   * `holder` (a workload) runs with these connections: each gets a token now (throws as `token` does), its file is
   * written, and it is refreshed ahead of expiry while anyone holds it. Replaces what the holder held before.
   */
  async hold(holder: string, workspace: string, names: string[]): Promise<void> {
    for (const n of names) this.writeFile(workspace, n, (await this.token(workspace, n)).accessToken);
    const now = new Set(names.map((n) => keyString(workspace, n)));
    const before = this.holders.get(holder);
    this.holders.set(holder, now);
    for (const k of now)
      if (!this.timers.has(k)) this.scheduleFrom(k, workspace, k.slice(workspace.length + 1));
    for (const k of before ?? []) if (!now.has(k) && !this.isHeld(k)) this.unschedule(k);
  }

  /** The holder no longer runs: connections nobody holds are no longer refreshed ahead. */
  release(holder: string): void {
    const before = this.holders.get(holder);
    this.holders.delete(holder);
    for (const k of before ?? []) if (!this.isHeld(k)) this.unschedule(k);
  }

  /**
   * The egress proxy saw the provider answer 401 to a request carrying this connection's token (`id` is
   * `<workspace>/<connection>`): refreshed once, unless it was just refreshed.
   */
  unauthorized(id: string): void {
    const i = id.indexOf('/');
    if (i < 0) return;
    const [workspace, name] = [id.slice(0, i), id.slice(i + 1)];
    void this.readRecord(workspace, name)
      .then((rec) => {
        if (rec?.lastRefreshAt !== undefined && this.now() - rec.lastRefreshAt < UNAUTHORIZED_QUIET_MS)
          return;
        this.deps.logger?.info(
          { workspace, connection: name },
          'the provider refused the access token: refreshing',
        );
        return this.refreshHeld(workspace, name, true);
      })
      .catch(() => undefined);
  }

  /** The provider's refusal recorded for the connection's current generation, if any (§7 message). */
  async failure(workspace: string, name: string): Promise<string | undefined> {
    const conn = await this.connection(workspace, name);
    const rec = await this.readRecord(workspace, name);
    return conn && rec?.failure?.generation === generationOf(conn) ? rec.failure.message : undefined;
  }

  /** The token into the connection's file here, unless the file holds it already. */
  private writeFile(workspace: string, name: string, token: string): void {
    const k = keyString(workspace, name);
    const digest = sha256(token);
    if (this.written.get(k) === digest) return;
    writeTokenFile(this.dirOf(workspace, name), token);
    this.written.set(k, digest);
  }

  private clearFile(workspace: string, name: string): void {
    this.written.delete(keyString(workspace, name));
    try {
      clearTokenFile(this.dirOf(workspace, name));
    } catch {}
  }

  /**
   * A token record changed (another server's refresh, or this one's): a connection held here gets its new token in
   * its file at once, or an empty file when the provider refused the grant.
   */
  private follow(o: StoredObject): void {
    const rec = o.body as TokenRecord;
    const k = keyString(o.workspace, o.parent);
    if (!this.isHeld(k)) return;
    if (rec.failure) {
      this.clearFile(o.workspace, o.parent);
      return;
    }
    if (!rec.accessToken || rec.expiresAt === undefined || rec.expiresAt <= this.now()) return;
    try {
      this.writeFile(o.workspace, o.parent, this.deps.resources.openSecret(rec.accessToken));
    } catch (err) {
      this.deps.logger?.warn(
        { workspace: o.workspace, connection: o.parent, err },
        'could not write a token file',
      );
    }
  }

  private isHeld(k: string): boolean {
    for (const s of this.holders.values()) if (s.has(k)) return true;
    return false;
  }

  private connection(workspace: string, name: string) {
    return this.deps.resources.get(connectionKind, workspace, [], name);
  }

  private recordKey(workspace: string, name: string): ResourceKey {
    return { kind: CONNECTION_TOKEN_KIND, workspace, parent: name, name: RECORD_NAME };
  }

  private async readRecord(workspace: string, name: string): Promise<TokenRecord | undefined> {
    return (await this.readStored(workspace, name)).rec;
  }

  /** The record and its version (null when there is none), which a write judged from it is conditioned on. */
  private async readStored(
    workspace: string,
    name: string,
  ): Promise<{ rec?: TokenRecord; version: number | null }> {
    const o = await this.deps.resources.store.get(this.recordKey(workspace, name));
    return { rec: o?.body as TokenRecord | undefined, version: o?.resourceVersion ?? null };
  }

  /** Whether a change of the connection changed what it is (a user's write), not only its token state. */
  private specChanged(o: StoredObject): boolean {
    const last = this.generations.get(keyString(o.workspace, o.name));
    const gen = generationOf(o);
    this.generations.set(keyString(o.workspace, o.name), gen);
    return last !== undefined && last !== gen;
  }
  private readonly generations = new Map<string, number>();

  private async obtain(workspace: string, name: string, force: boolean, tries = 0): Promise<AccessToken> {
    const r = this.deps.resources;
    const conn = await this.connection(workspace, name);
    const which = `integration connection ${JSON.stringify(name)}`;
    if (!conn) throw new ConnectionTokenFailed(`${which} does not exist`);
    const gen = generationOf(conn);
    this.generations.set(keyString(workspace, name), gen);
    const spec = r.openSecrets(connectionKind, conn.body.spec ?? {});
    const cfg = oauth2Config(spec);
    if (!cfg) throw new ConnectionTokenFailed(`${which} is not an OAuth2 connection`);
    const secret = (spec.secret ?? {}) as Record<string, string>;
    const given = secret[REFRESH_TOKEN] ?? '';
    const origin = sha256(given);
    const read = await this.readStored(workspace, name);
    const stored = read.rec;
    let version = read.version;
    // A failure is written only over the record it was judged from: another server (a leader deposed, or the next
    // one) may have rotated the refresh token meanwhile, and the record read here would put back the retired one
    // (docs/decisions/080-leader-session-mark.md). A record that changed is read again instead.
    const again = () => {
      if (tries >= 2) return undefined;
      return this.obtain(workspace, name, false, tries + 1);
    };
    // A new REFRESH_TOKEN in the spec (the user connected again) starts afresh; another change keeps the tokens
    // (still the provider's) but lifts a refusal, which the change may have answered.
    // The claim stays out of every record written from this one: a write ends the refresh it was made by.
    const rec: TokenRecord = stored?.origin === origin ? { ...stored, claim: undefined } : { origin };
    if (rec.failure && rec.failure.generation !== gen) rec.failure = undefined;
    if (rec.failure) throw new ConnectionTokenFailed(rec.failure.message);
    const held =
      rec.accessToken && rec.expiresAt !== undefined
        ? { accessToken: r.openSecret(rec.accessToken), expiresAt: rec.expiresAt }
        : undefined;
    if (!force && held && this.now() < refreshAt(rec)) return held;
    const refreshToken = rec.refreshToken ? r.openSecret(rec.refreshToken) : given;
    if (!refreshToken) {
      const message = `${REFRESH_FAILED} (${which}): it holds no REFRESH_TOKEN; ${RECONNECT_ADVICE}`;
      const failed = { ...rec, failure: { message, generation: gen } };
      if (!(await this.writeOver(version, workspace, name, failed, message))) {
        const next = await again();
        if (next) return next;
      }
      throw new ConnectionTokenFailed(message);
    }
    // Another server refreshes it now: its outcome answers this ask too (a provider that rotates refresh tokens
    // revokes the grant of one used twice). A token still valid serves meanwhile.
    const claim = stored?.claim;
    if (claim && claim.by !== this.id && claim.until > this.now()) {
      if (!force && held && this.now() < held.expiresAt) return held;
      if (tries >= CLAIM_WAITS)
        throw new Error(`another server has been refreshing ${which} for too long; trying again`);
      await this.waitForChange(workspace, name, version, claim.until);
      // A refresh made meanwhile answers a forced ask; a claim that lapsed or failed does not.
      const after = await this.readRecord(workspace, name);
      const refreshed = after?.lastRefreshAt !== undefined && after.lastRefreshAt !== stored?.lastRefreshAt;
      return this.obtain(workspace, name, force && !refreshed, tries + 1);
    }
    const claimed = await this.claim(version, workspace, name, rec);
    if (claimed === undefined) {
      // Another server claimed it first, or wrote the record since it was read: read it again.
      const next = tries < CLAIM_WAITS ? await this.obtain(workspace, name, force, tries + 1) : undefined;
      if (next) return next;
      throw new Error(`the token record of ${which} keeps changing; trying again`);
    }
    version = claimed;
    const started = this.now();
    try {
      const grant = await requestGrant(
        this.deps.outbound,
        cfg.tokenUrl,
        {
          clientId: secret[CLIENT_ID] ?? '',
          clientSecret: secret[CLIENT_SECRET] || undefined,
          clientAuth: cfg.clientAuth,
        },
        { grant_type: 'refresh_token', refresh_token: refreshToken },
      );
      const now = this.now();
      const next: TokenRecord = {
        ...rec,
        accessToken: r.sealSecret(grant.accessToken),
        issuedAt: now,
        expiresAt: now + (grant.expiresIn ?? DEFAULT_TOKEN_LIFETIME_S) * 1000,
        scope: grant.scope ?? rec.scope,
        // Stored sealed in the same transaction as the access token, before either is used: the provider has
        // already retired the old one, so a server killed after this write loses nothing.
        refreshToken: grant.refreshToken ? r.sealSecret(grant.refreshToken) : rec.refreshToken,
        rotations: (rec.rotations ?? 0) + (grant.refreshToken && grant.refreshToken !== refreshToken ? 1 : 0),
        lastRefreshAt: now,
        failure: undefined,
      };
      await this.writeState(workspace, name, next);
      if (this.isHeld(keyString(workspace, name))) this.writeFile(workspace, name, grant.accessToken);
      this.retryDelay.delete(keyString(workspace, name));
      this.deps.logger?.info(
        {
          workspace,
          connection: name,
          ms: now - started,
          validUntil: new Date(next.expiresAt!).toISOString(),
          rotated: next.rotations !== (rec.rotations ?? 0),
        },
        'oauth2 access token refreshed',
      );
      return { accessToken: grant.accessToken, expiresAt: next.expiresAt! };
    } catch (err) {
      if (err instanceof GrantRefused) {
        const message = `${REFRESH_FAILED} (${which}): the provider refused the refresh token: ${err.message}; ${RECONNECT_ADVICE}`;
        const failed = { ...rec, failure: { message, generation: gen } };
        // The refusal may be of a refresh token another server rotated meanwhile: the record it wrote decides.
        if (!(await this.writeOver(version, workspace, name, failed, message))) {
          const next = await again();
          if (next) return next;
        }
        this.clearFile(workspace, name);
        this.deps.logger?.warn({ workspace, connection: name, error: err.error }, 'oauth2 refresh refused');
        throw new ConnectionTokenFailed(message);
      }
      const message = `refreshing the access token failed, trying again: ${(err as Error).message}`;
      const written = await this.writeOver(version, workspace, name, rec, message).catch(() => true);
      if (!written) {
        const next = await again()?.catch(() => undefined);
        if (next) return next;
      }
      this.deps.logger?.warn(
        { workspace, connection: name, reason: (err as Error).message },
        'oauth2 refresh failed',
      );
      // A token still valid serves until it expires; the held schedule tries again.
      if (held && this.now() < held.expiresAt) return held;
      throw err;
    }
  }

  /**
   * Claims the connection's next refresh for this server: the record as read (`version`, null: none) with this
   * server's claim, written only over that version. The new version, or undefined when the record changed meanwhile
   * (another server's claim or refresh) and nothing was written.
   */
  private async claim(
    version: number | null,
    workspace: string,
    name: string,
    rec: TokenRecord,
  ): Promise<number | undefined> {
    const key = this.recordKey(workspace, name);
    const body = JSON.parse(
      JSON.stringify({
        ...rec,
        claim: { by: this.id, until: this.now() + (this.deps.claimMs ?? REFRESH_CLAIM_MS) },
      }),
    ) as TokenRecord;
    try {
      const [o] = await this.deps.resources.store.write([
        version === null
          ? { op: 'create', key, body }
          : { op: 'update', key, mutate: () => body, expectVersion: version },
      ]);
      return o?.resourceVersion;
    } catch (err) {
      if (err instanceof StoreError && err.key.kind === CONNECTION_TOKEN_KIND) return undefined;
      throw err;
    }
  }

  /** Until the record is written over `version` (null: none), or `until` (this server's clock) passes. */
  private async waitForChange(workspace: string, name: string, version: number | null, until: number) {
    const deadline = Date.now() + Math.max(0, until - this.now());
    while (!this.closed && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, Math.min(CLAIM_POLL_MS, deadline - Date.now())));
      if ((await this.readStored(workspace, name)).version !== version) return;
    }
  }

  /**
   * `writeState` over the record as read (`version`, null: none): false, and nothing written, when it changed
   * meanwhile. A successful refresh's write is not conditioned: the provider has retired the refresh token it was
   * given, so the one it returned must be kept whatever was written since.
   */
  private async writeOver(
    version: number | null,
    workspace: string,
    name: string,
    rec: TokenRecord,
    error?: string,
  ): Promise<boolean> {
    try {
      await this.writeState(workspace, name, rec, error, version);
      return true;
    } catch (err) {
      if (err instanceof StoreError && err.key.kind === CONNECTION_TOKEN_KIND) return false;
      throw err;
    }
  }

  /**
   * Writes the record and the connection's public token state in one transaction; over the record's version
   * `expect` when given (null: only if there is none).
   */
  private async writeState(
    workspace: string,
    name: string,
    rec: TokenRecord,
    error?: string,
    expect?: number | null,
  ): Promise<void> {
    const store = this.deps.resources.store;
    const key = this.recordKey(workspace, name);
    const exists = expect === undefined ? !!(await store.get(key)) : expect !== null;
    const body = JSON.parse(JSON.stringify(rec)) as TokenRecord;
    const state = {
      state: rec.failure ? 'FAILED' : rec.accessToken ? 'VALID' : 'PENDING',
      ...(rec.expiresAt !== undefined && !rec.failure
        ? { validUntil: new Date(rec.expiresAt).toISOString() }
        : {}),
      ...(rec.lastRefreshAt !== undefined
        ? { lastRefreshAt: new Date(rec.lastRefreshAt).toISOString() }
        : {}),
      ...(error ? { lastError: error } : {}),
      ...(rec.scope ? { scope: rec.scope } : {}),
      ...(rec.rotations ? { rotations: rec.rotations } : {}),
    };
    const ops: WriteOp[] = [
      exists
        ? { op: 'update', key, mutate: () => body, ...(expect ? { expectVersion: expect } : {}) }
        : { op: 'create', key, body },
      {
        op: 'update',
        key: { kind: connectionKind.kind, workspace, parent: '', name },
        mutate: (cur) => ({ ...cur.body, token: state }),
      },
    ];
    await store.write(ops);
  }

  private scheduleFrom(k: string, workspace: string, name: string): void {
    void this.readRecord(workspace, name).then((rec) => {
      if (!this.isHeld(k) || this.timers.has(k)) return;
      this.schedule(workspace, name, rec ? Math.max(0, refreshAt(rec) - this.now()) : 0);
    });
  }

  private schedule(workspace: string, name: string, delayMs: number): void {
    const k = keyString(workspace, name);
    if (this.closed) return;
    this.unschedule(k);
    const t = setTimeout(() => {
      this.timers.delete(k);
      void this.refreshHeld(workspace, name, false);
    }, delayMs);
    t.unref();
    this.timers.set(k, t);
  }

  private unschedule(k: string): void {
    const t = this.timers.get(k);
    if (t) clearTimeout(t);
    this.timers.delete(k);
  }

  /** One scheduled (or forced) refresh of a held connection, and the next one planned from its outcome. */
  private async refreshHeld(workspace: string, name: string, force: boolean): Promise<void> {
    const k = keyString(workspace, name);
    try {
      const t = await this.token(workspace, name, force);
      if (this.isHeld(k)) {
        this.writeFile(workspace, name, t.accessToken);
        const rec = await this.readRecord(workspace, name);
        this.schedule(
          workspace,
          name,
          rec ? Math.max(REFRESH_AHEAD_MIN_MS, refreshAt(rec) - this.now()) : RETRY_FIRST_MS,
        );
      }
    } catch (err) {
      // A refusal waits for the connection to change (its watch reschedules); anything else is tried again.
      if (err instanceof ConnectionTokenFailed || !this.isHeld(k)) return;
      const delay = Math.min(RETRY_MAX_MS, this.retryDelay.get(k) ?? RETRY_FIRST_MS);
      this.retryDelay.set(k, delay * 2);
      this.schedule(workspace, name, delay);
    }
  }
}

/** When a token record's access token should be replaced. */
function refreshAt(rec: TokenRecord): number {
  if (rec.expiresAt === undefined) return 0;
  const lifetime = rec.expiresAt - (rec.issuedAt ?? rec.expiresAt);
  const ahead = Math.min(
    REFRESH_AHEAD_MAX_MS,
    Math.max(REFRESH_AHEAD_MIN_MS, lifetime * REFRESH_AHEAD_SHARE),
  );
  return rec.expiresAt - ahead;
}

const generationOf = (o: StoredObject): number => Number(o.body.metadata?.generation ?? 0);
