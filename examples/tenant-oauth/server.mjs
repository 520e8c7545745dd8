// An example tenant backend for Berth's tenant OAuth flow (the specification's §5, docs/oauth.md): each end user of
// the tenant's product presses "connect", authorizes the mail provider with offline access, and gets an integration
// connection and an MCP server of their own that send mail as them. Steps 1-6, exactly:
//   1. GET /connect                  the UI sends the user here
//   2. → {auth_url}?client_id&redirect_uri&scope&response_type=code&access_type=offline&state
//   3. GET /callback?code&state      the provider sends the user back with a temporary code
//   4. POST {token_url}              code, client_id, client_secret, redirect_uri, grant_type=authorization_code
//   5. POST /v0/integrations/connections (CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN), POST /v0/functions (bound to it)
//   6. store the MCP configuration, redirect to the frontend with a success confirmation
// Plain Node (no framework); its one package, yazl, packs the MCP server's code and comes with the repository.
// Run it beside `berth serve`: `node examples/tenant-oauth/server.mjs` (settings: README.md beside this file).
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, relative, resolve } from 'node:path';
import yazl from 'yazl';

const here = dirname(new URL(import.meta.url).pathname);
const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`set ${name} (see examples/tenant-oauth/README.md)`);
  return v;
};

export function settings(e = process.env) {
  const get = (name, fallback) => e[name] ?? fallback;
  const port = Number(get('PORT', '3000'));
  return {
    port,
    host: get('HOST', '127.0.0.1'),
    berthUrl: get('BERTH_URL', 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    berthKey: get('BERTH_API_KEY'),
    /** The workspace the users' objects go in (X-Service-Workspace); unset: the key's own. */
    workspace: get('BERTH_WORKSPACE'),
    authUrl: get('OAUTH_AUTH_URL'),
    tokenUrl: get('OAUTH_TOKEN_URL'),
    clientId: get('OAUTH_CLIENT_ID'),
    clientSecret: get('OAUTH_CLIENT_SECRET'),
    /** Must match the URI registered with the provider exactly (§5). */
    redirectUri: get('OAUTH_REDIRECT_URI', `http://127.0.0.1:${port}/callback`),
    /** Space-separated: the provider's send-mail scope, openid, profile, email (§5 step 2). */
    scopes: get('OAUTH_SCOPES', 'https://www.googleapis.com/auth/gmail.send openid profile email'),
    /** `offline` asks for a refresh token (§5 step 2); anything else shows what happens without (§7). */
    accessType: get('OAUTH_ACCESS_TYPE', 'offline'),
    /** More query parameters for the provider, `k=v&k=v` (Google: prompt=consent to get a refresh token again). */
    extraAuthParams: get('OAUTH_EXTRA_AUTH_PARAMS', ''),
    /** The integration of the users' connections: `google`, `microsoft`, or `oauth2` (tokenUrl in config). */
    integration: get('BERTH_INTEGRATION', 'oauth2'),
    /** The mail API: its base URL (for the MCP server) and host (where Berth's proxy puts the user's token). */
    mailApiBase: get('MAIL_API_BASE', 'https://gmail.googleapis.com'),
    /** The MCP server's code: the catalog's mail template by default. */
    mcpSource: resolve(get('MCP_SOURCE', join(here, '../../templates/mcp-mail'))),
    mcpMemoryMb: Number(get('MCP_MEMORY_MB', '512')),
  };
}

// --- §7: what each failure means, for the user and for the tenant's developer -------------------------------------
export const EXPLAIN = {
  invalid_scope:
    "Invalid scope: the provider does not offer the mail scope to this OAuth application. Enable the mail API for the application in the provider's console (and add the scope to its consent screen), then connect again.",
  redirect_uri_mismatch:
    "Redirect URI mismatch: the redirect_uri this backend sends differs from the one registered for the OAuth application. They must match exactly (scheme, host, port, path, trailing slash): fix OAUTH_REDIRECT_URI or the provider's console.",
  no_refresh_token:
    'Refresh token missing: the provider gave no refresh token, so the MCP server could not act for you once the first access token expires. The authorization request must ask for offline access (access_type=offline; with Google also prompt=consent if you connected before). Connect again.',
  refresh_failed:
    'Your mail connection stopped working (refresh token missing or refresh fails: access was revoked, or it expired). Connect again.',
  access_denied: 'You declined the authorization at the provider. Nothing was connected.',
};

/** The provider's error for a failed authorization or code exchange, mapped to its cause (§7). */
export function explain(error, description = '') {
  const d = `${error} ${description}`.toLowerCase();
  if (error === 'invalid_scope') return EXPLAIN.invalid_scope;
  if (error === 'redirect_uri_mismatch' || error === 'invalid_redirect_uri' || /redirect_uri/.test(d))
    return EXPLAIN.redirect_uri_mismatch;
  if (error === 'access_denied') return EXPLAIN.access_denied;
  return `The provider refused: ${error}${description ? ` (${description})` : ''}.`;
}

/** A user id as part of an object name: a DNS label (Berth's names), kept unique with a short hash when changed. */
export function nameFor(user) {
  const slug = user
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return `mail-${slug || 'user'}`;
}

/** The MCP server's code, zipped once (without installed or built files: Berth installs and builds it). */
function packSource(dir) {
  const zip = new yazl.ZipFile();
  const walk = (d) => {
    for (const e of readdirSync(d)) {
      if (['node_modules', 'dist', '.git'].includes(e)) continue;
      const p = join(d, e);
      if (statSync(p).isDirectory()) walk(p);
      else zip.addBuffer(readFileSync(p), relative(dir, p), { mtime: new Date(0) });
    }
  };
  walk(dir);
  zip.end();
  return new Promise((res, rej) => {
    const parts = [];
    zip.outputStream.on('data', (c) => parts.push(c));
    zip.outputStream.on('end', () => res(Buffer.concat(parts)));
    zip.outputStream.on('error', rej);
  });
}

export function startBackend(s = settings()) {
  if (!s.berthKey) throw new Error('set BERTH_API_KEY (see examples/tenant-oauth/README.md)');
  for (const k of ['authUrl', 'tokenUrl', 'clientId', 'clientSecret'])
    if (!s[k]) throw new Error(`set OAUTH_${k.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`);
  /** Authorizations under way: state → user (a state is used once, within ten minutes). */
  const pending = new Map();
  /** Step 6: each connected user's MCP configuration. */
  const connected = new Map();
  const sourceZip = packSource(s.mcpSource);

  async function berth(method, path, body, query = '') {
    const headers = { authorization: `Bearer ${s.berthKey}`, accept: 'application/json' };
    if (s.workspace) headers['x-service-workspace'] = s.workspace;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${s.berthUrl}/v0${path}${query}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = { detail: text };
    }
    return { status: res.status, body: json, headers: res.headers };
  }

  const mcpUrlOf = (ws, name) => `${s.berthUrl}/run/${ws}/functions/${name}/mcp`;

  /** Step 5: the user's connection and MCP server (created, or replaced when the user connects again). */
  async function provision(user, refreshToken) {
    const name = nameFor(user);
    const connection = {
      metadata: { name, labels: { 'tenant-user': name } },
      spec: {
        integration: s.integration,
        config: {
          ...(s.integration === 'oauth2' ? { tokenUrl: s.tokenUrl, authUrl: s.authUrl } : {}),
          scopes: s.scopes,
          apiDomains: [new URL(s.mailApiBase).hostname],
          apiBaseUrl: s.mailApiBase,
        },
        secret: { CLIENT_ID: s.clientId, CLIENT_SECRET: s.clientSecret, REFRESH_TOKEN: refreshToken },
      },
    };
    let c = await berth('POST', '/integrations/connections', connection);
    if (c.status === 409) c = await berth('PUT', `/integrations/connections/${name}`, connection);
    if (c.status >= 300) throw new Error(`Berth refused the connection: ${c.body.detail ?? c.status}`);
    const fn = {
      metadata: { name, labels: { 'tenant-user': name } },
      spec: {
        integrationConnections: [name],
        runtime: { memory: s.mcpMemoryMb, envs: [{ name: 'MAIL_CONNECTION', value: name }] },
      },
    };
    // ?upload=true: the answer says where to send the server's code (Berth builds it once for every user).
    let f = await berth('POST', '/functions', fn, '?upload=true');
    if (f.status === 409) f = await berth('PUT', `/functions/${name}`, fn, '?upload=true');
    if (f.status >= 300) throw new Error(`Berth refused the MCP server: ${f.body.detail ?? f.status}`);
    const upload = f.headers.get('x-blaxel-upload-url');
    const put = await fetch(upload, {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: await sourceZip,
    });
    if (!put.ok) throw new Error(`uploading the MCP server's code failed: ${put.status} ${await put.text()}`);
    const ws = f.body.metadata.workspace;
    return { connection: name, function: name, workspace: ws, mcpUrl: mcpUrlOf(ws, name) };
  }

  async function status(user) {
    const name = nameFor(user);
    const f = await berth('GET', `/functions/${name}`);
    if (f.status === 404) return undefined;
    const c = await berth('GET', `/integrations/connections/${name}`);
    const last = f.body.events?.at(-1)?.message ?? '';
    return {
      name,
      status: f.body.status,
      mcpUrl: mcpUrlOf(f.body.metadata.workspace, name),
      token: c.body.token,
      // Berth says so in these words (§7) when the user's grant cannot be refreshed: ask them to connect again.
      reconnect: f.body.status === 'FAILED' && last.startsWith('refresh token missing or refresh fails'),
      message: last,
    };
  }

  async function disconnect(user) {
    const name = nameFor(user);
    await berth('DELETE', `/functions/${name}`);
    await berth('DELETE', `/integrations/connections/${name}`);
    connected.delete(user);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => page(res, 500, `<p class="error">${esc(err.message)}</p>`));
  });

  async function handle(req, res) {
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    const user = cookie(req, 'user');
    if (req.method === 'POST' && url.pathname === '/login') {
      const form = new URLSearchParams(await body(req));
      const who = (form.get('user') ?? '').trim();
      res.setHeader('set-cookie', `user=${encodeURIComponent(who)}; HttpOnly; SameSite=Lax; Path=/`);
      return redirect(res, '/');
    }
    if (url.pathname === '/') return home(res, user, url.searchParams);
    if (!user) return redirect(res, '/');
    if (url.pathname === '/connect') {
      // Step 2: the provider's authorization page, with a state tying the answer to this user.
      const state = randomBytes(16).toString('base64url');
      pending.set(state, { user, expires: Date.now() + 10 * 60_000 });
      const q = new URLSearchParams({
        client_id: s.clientId,
        redirect_uri: s.redirectUri,
        scope: s.scopes,
        response_type: 'code',
        state,
      });
      if (s.accessType) q.set('access_type', s.accessType);
      for (const [k, v] of new URLSearchParams(s.extraAuthParams)) q.set(k, v);
      return redirect(res, `${s.authUrl}?${q}`);
    }
    if (url.pathname === '/callback') {
      const state = url.searchParams.get('state') ?? '';
      const p = pending.get(state);
      pending.delete(state);
      if (!p || p.user !== user || p.expires < Date.now())
        return redirect(
          res,
          `/?error=${encodeURIComponent('This sign-in link expired or is not yours: connect again.')}`,
        );
      const err = url.searchParams.get('error');
      if (err)
        return redirect(
          res,
          `/?error=${encodeURIComponent(explain(err, url.searchParams.get('error_description') ?? ''))}`,
        );
      // Step 4: the code for tokens, with the client's secret (this is why the redirect URI is a server's).
      const tr = await fetch(s.tokenUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({
          code: url.searchParams.get('code') ?? '',
          client_id: s.clientId,
          client_secret: s.clientSecret,
          redirect_uri: s.redirectUri,
          grant_type: 'authorization_code',
        }),
      });
      const tokens = await tr.json().catch(() => ({}));
      if (!tr.ok)
        return redirect(
          res,
          `/?error=${encodeURIComponent(explain(tokens.error ?? `HTTP ${tr.status}`, tokens.error_description))}`,
        );
      if (!tokens.refresh_token)
        return redirect(res, `/?error=${encodeURIComponent(EXPLAIN.no_refresh_token)}`);
      // Step 5, then 6.
      connected.set(user, await provision(user, tokens.refresh_token));
      return redirect(res, '/?connected=1');
    }
    if (req.method === 'POST' && url.pathname === '/disconnect') {
      await disconnect(user);
      return redirect(res, '/?disconnected=1');
    }
    if (url.pathname === '/api/mcp') {
      // What the tenant's product reads to use the user's MCP server.
      const st = await status(user);
      res.writeHead(st ? 200 : 404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(st ?? { error: 'not connected' }));
    }
    page(res, 404, '<p>Not found.</p>');
  }

  async function home(res, user, q) {
    if (!user)
      return page(
        res,
        200,
        `<form method="post" action="/login"><label>Your name in this app <input name="user" required></label>
         <button type="submit" id="login">Sign in</button></form>`,
      );
    const st = await status(user);
    const notes = [
      q.get('connected') && '<p class="ok" id="connected">Connected: your MCP server is being deployed.</p>',
      q.get('disconnected') &&
        '<p class="ok" id="disconnected">Disconnected: your MCP server and connection are deleted.</p>',
      q.get('error') && `<p class="error" id="error">${esc(q.get('error'))}</p>`,
      st?.reconnect && `<p class="error" id="reconnect">${esc(EXPLAIN.refresh_failed)}</p>`,
    ].filter(Boolean);
    const state = st
      ? `<p>MCP server <code id="mcp-url">${esc(st.mcpUrl)}</code>: <span id="status">${esc(st.status)}</span>
         (token ${esc(st.token?.state ?? 'PENDING')}${st.token?.validUntil ? `, valid until ${esc(st.token.validUntil)}` : ''})</p>
         <form method="post" action="/disconnect"><button type="submit" id="disconnect">Disconnect</button></form>`
      : '<p>Not connected.</p>';
    return page(
      res,
      200,
      `<p>Signed in as <b id="user">${esc(user)}</b>.</p>${notes.join('')}${state}
       <p><a id="connect" href="/connect">${st ? 'Connect again' : 'Connect your mail'}</a></p>`,
    );
  }

  return {
    server,
    connected,
    listen: () => new Promise((r) => server.listen(s.port, s.host, () => r(server.address().port))),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const esc = (v) =>
  String(v).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );

function page(res, status, content) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><meta charset="utf-8"><title>Mail for your agent</title>
<style>body{font:15px system-ui;margin:3em auto;max-width:44em}.error{color:#b00}.ok{color:#070}</style></head>
<body><h1>Mail for your agent</h1>${content}</body></html>`);
}

function redirect(res, location) {
  res.writeHead(302, { location });
  res.end();
}

function cookie(req, name) {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('=')) || undefined;
  }
  return undefined;
}

function body(req) {
  return new Promise((res, rej) => {
    let b = '';
    req.on('data', (d) => {
      b += d;
      if (b.length > 64 * 1024) req.destroy();
    });
    req.on('end', () => res(b));
    req.on('error', rej);
  });
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(here, 'server.mjs')) {
  env('BERTH_API_KEY');
  const b = startBackend();
  b.listen().then((port) => console.log(`tenant backend on http://${settings().host}:${port}/`));
}
