// A small mail API standing for the provider's (Gmail's wire: users.getProfile, users.messages.send with a raw RFC 2822
// message), served in the egress tests' upstream namespace as `https://mail.test`. It accepts only access tokens of the
// test OpenID provider (ES256 JWTs signed by its key, its issuer, the mail audience, not expired) carrying the
// send-mail scope, and sends as the user the token names. Every decision and every mail is printed as a line the
// test reads: `AUTH ok <email>`, `AUTH refused <reason>`, `MAIL {json}`.
// Configuration (environment): MAIL_JWK (the provider's public JWK), MAIL_ISSUER, MAIL_AUDIENCE, MAIL_SCOPE.
const { createPublicKey, verify, randomUUID } = require('node:crypto');

const key = createPublicKey({ key: JSON.parse(process.env.MAIL_JWK), format: 'jwk' });
const b64json = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));

/** The token's claims when the provider signed it for this API and it is still valid; else why not. */
function check(authorization) {
  const m = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization ?? '');
  if (!m) return { reason: 'no bearer token' };
  let head;
  let claims;
  try {
    head = b64json(m[1]);
    claims = b64json(m[2]);
  } catch {
    return { reason: 'malformed token' };
  }
  if (head.alg !== 'ES256') return { reason: `unexpected alg ${head.alg}` };
  const signed = Buffer.from(`${m[1]}.${m[2]}`);
  const sig = Buffer.from(m[3], 'base64url');
  if (!verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, sig)) return { reason: 'bad signature' };
  if (claims.iss !== process.env.MAIL_ISSUER) return { reason: 'another issuer' };
  const aud = [claims.aud].flat();
  if (!aud.includes(process.env.MAIL_AUDIENCE)) return { reason: 'another audience' };
  if (!(claims.exp * 1000 > Date.now())) return { reason: 'expired' };
  if (
    !String(claims.scope ?? '')
      .split(' ')
      .includes(process.env.MAIL_SCOPE)
  )
    return { reason: 'insufficient scope', status: 403 };
  return { claims };
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Subject and body of a raw message (the headers this API reads: To, Subject, encoded words). */
function parseRaw(raw) {
  const text = Buffer.from(raw, 'base64url').toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  const head = text.slice(0, split);
  const header = (name) => {
    const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
    const v = line?.slice(name.length + 1).trim() ?? '';
    return v.replace(/=\?UTF-8\?B\?([^?]*)\?=/gi, (_m, b) => Buffer.from(b, 'base64').toString('utf8'));
  };
  return { to: header('To'), subject: header('Subject'), text: text.slice(split + 4) };
}

module.exports = (req, res, say) => {
  let body = '';
  req.on('data', (d) => {
    body += d;
  });
  req.on('end', () => {
    const auth = check(req.headers.authorization);
    if (!auth.claims) {
      say(`AUTH refused ${auth.reason}`);
      res.setHeader('www-authenticate', `Bearer error="invalid_token", error_description="${auth.reason}"`);
      const status = auth.status ?? 401;
      return send(res, status, {
        error: {
          code: status,
          message: auth.reason,
          status: status === 401 ? 'UNAUTHENTICATED' : 'PERMISSION_DENIED',
        },
      });
    }
    const email = auth.claims.email;
    say(`AUTH ok ${email}`);
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/gmail/v1/users/me/profile')
      return send(res, 200, { emailAddress: email, messagesTotal: 0 });
    if (req.method === 'POST' && path === '/gmail/v1/users/me/messages/send') {
      let raw;
      try {
        raw = JSON.parse(body).raw;
      } catch {}
      if (typeof raw !== 'string')
        return send(res, 400, { error: { code: 400, message: 'raw is required' } });
      const id = randomUUID();
      say(`MAIL ${JSON.stringify({ id, from: email, ...parseRaw(raw) })}`);
      return send(res, 200, { id, threadId: id, labelIds: ['SENT'] });
    }
    send(res, 404, { error: { code: 404, message: 'not found' } });
  });
};
