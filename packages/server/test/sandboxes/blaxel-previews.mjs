// Creates a public and a private preview of a running sandbox, and a token for the private one, with the
// unmodified @blaxel/core SDK; prints their URLs and the token as one `RESULT <json>` line.
import { SandboxInstance } from '@blaxel/core';

const sb = await SandboxInstance.get(process.env.SANDBOX_NAME);
const port = Number(process.env.PREVIEW_PORT);
const pub = await sb.previews.create({ metadata: { name: 'pub' }, spec: { port, public: true } });
const priv = await sb.previews.create({
  metadata: { name: 'priv' },
  spec: {
    port,
    public: false,
    requestHeaders: { 'x-from-preview': 'yes' },
    responseHeaders: { 'x-served-by': 'berth' },
  },
});
const token = await priv.tokens.create(new Date(Date.now() + 3_600_000));
console.log(
  `RESULT ${JSON.stringify({ publicUrl: pub.spec.url, privateUrl: priv.spec.url, token: token.value })}`,
);
