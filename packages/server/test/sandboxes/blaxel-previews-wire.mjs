// The preview calls of the SDK vendor's own suite that Berth once failed (decision 085), with the unmodified
// @blaxel/core SDK: a preview with a `prefixUrl`, 15 tokens created at once (the SDK names each
// `token-<Date.now()>`), and a token deleted by its value. Each step's outcome, or its error, goes into one
// `RESULT <json>` line, so one failing step does not hide the others.
import { SandboxInstance } from '@blaxel/core';

const out = {};
const step = async (name, fn) => {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = { error: String(e?.message ?? JSON.stringify(e?.error ?? e)) };
  }
};
const sb = await SandboxInstance.get(process.env.SANDBOX_NAME);
const expires = new Date(Date.now() + 3_600_000);
await step('prefixed', async () => {
  const p = await sb.previews.create({
    metadata: { name: 'prefixed' },
    spec: { port: 3000, public: false, prefixUrl: process.env.PREFIX },
  });
  return { url: p.spec.url, token: (await p.tokens.create(expires)).value };
});
const preview = await sb.previews.create({ metadata: { name: 'many' }, spec: { port: 3000, public: false } });
await step('concurrent', async () => {
  const tokens = await Promise.all(Array.from({ length: 15 }, () => preview.tokens.create(expires)));
  return { values: tokens.map((t) => t.value), listed: (await preview.tokens.list()).length };
});
await step('deleteByValue', async () => {
  const t = await preview.tokens.create(expires);
  const before = (await preview.tokens.list()).length;
  await preview.tokens.delete(t.value);
  return { value: t.value, before, after: (await preview.tokens.list()).length };
});
console.log(`RESULT ${JSON.stringify(out)}`);
