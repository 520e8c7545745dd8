import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Endpoint } from './endpoints.js';
import { pinCall, pinForm } from './model-pin.js';
import { providerFor } from './providers/index.js';

const endpoint = (model: string | undefined, type = 'openai'): Endpoint => ({
  workspace: 'w',
  name: 'cheap',
  provider: providerFor(type)!,
  model,
  upstreams: [],
  budgets: [],
});

const refused = (f: () => unknown, pattern: RegExp) =>
  assert.throws(f, (e: any) => e.name === 'FORBIDDEN' && e.status === 403 && pattern.test(e.detail));

test('a body naming the endpoint, its model, or none is for its model; another model is refused', () => {
  const ep = endpoint('gpt-4o-mini');
  for (const body of [{}, { model: 'cheap' }, { model: 'gpt-4o-mini' }, { model: null }, { model: '' }])
    assert.equal(pinCall(ep, 'POST', '/v1/chat/completions', '', body).model, 'gpt-4o-mini');
  refused(
    () => pinCall(ep, 'POST', '/v1/chat/completions', '', { model: 'gpt-4o' }),
    /serves gpt-4o-mini only; this call names gpt-4o in its body/,
  );
  refused(() => pinCall(ep, 'POST', '/v1/fine_tuning/jobs', '', { model: 'gpt-4o' }), /gpt-4o/);
  refused(() => pinCall(ep, 'POST', '/v1/chat/completions', '', { model: ['gpt-4o'] }), /\["gpt-4o"\]/);
});

test('an endpoint whose spec names no model serves only calls that name none', () => {
  const ep = endpoint(undefined);
  assert.equal(pinCall(ep, 'POST', '/v1/chat/completions', '', {}).model, undefined);
  assert.equal(pinCall(ep, 'POST', '/v1/chat/completions', '', { model: 'cheap' }).model, undefined);
  refused(
    () => pinCall(ep, 'POST', '/v1/chat/completions', '', { model: 'gpt-4o' }),
    /names no model \(spec.runtime.model\)/,
  );
});

test('a model named in the path (Gemini, Azure) or the query is judged and pinned the same way', () => {
  const gem = endpoint('gemini-2.5-flash', 'gemini');
  const path = (p: string) => pinCall(gem, 'POST', p, '', {}).path;
  assert.equal(
    path('/v1beta/models/cheap:generateContent'),
    '/v1beta/models/gemini-2.5-flash:generateContent',
  );
  assert.equal(
    path('/v1beta/models/gemini-2.5-flash:streamGenerateContent'),
    '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
  );
  refused(() => path('/v1beta/models/gemini-2.5-pro:generateContent'), /names gemini-2.5-pro in its path/);
  refused(() => path('/v1beta/tunedModels/mine:generateContent'), /tunedModels\/mine/);
  assert.equal(path('/v1beta/models/gemini-2.5-pro'), '/v1beta/models/gemini-2.5-pro', 'reads stay readable');
  const az = endpoint('gpt4o-prod', 'azure-openai');
  assert.equal(
    pinCall(az, 'POST', '/openai/deployments/cheap/chat/completions', '', {}).path,
    '/openai/deployments/gpt4o-prod/chat/completions',
  );
  refused(() => pinCall(az, 'POST', '/openai/deployments/gpt5/chat/completions', '', {}), /gpt5/);
  const ep = endpoint('gpt-4o-mini');
  assert.equal(pinCall(ep, 'POST', '/v1/realtime', 'model=cheap&x=1', {}).query, 'x=1&model=gpt-4o-mini');
  refused(() => pinCall(ep, 'POST', '/v1/realtime', '%6Dodel=gpt-4o', {}), /in its query/);
});

test('a path the provider would read differently (dot segments, backslashes, controls, %) is refused', () => {
  const gem = endpoint('gemini-2.5-flash', 'gemini');
  for (const p of [
    '/v1beta/models/x/../gemini-ultra:generateContent',
    '/v1beta/models\\..\\models/gemini-ultra:generateContent',
    '/v1beta/mo\tdels/gemini-ultra:generateContent',
    '/v1beta/models%2Fgemini-ultra:generateContent',
    '/v1beta/./models/gemini-ultra:generateContent',
  ])
    assert.throws(
      () => pinCall(gem, 'POST', p, '', {}),
      (e: any) => e.name === 'MALFORMED_REQUEST' && e.status === 400,
      p,
    );
});

test('batch APIs, whose models Berth can neither pin nor meter, are refused', () => {
  const ep = endpoint('gpt-4o-mini');
  for (const p of ['/v1/batches', '/v1/messages/batches', '/v1/batch/jobs'])
    refused(() => pinCall(ep, 'POST', p, '', {}), /neither pin/);
  assert.equal(pinCall(ep, 'GET', '/v1/batches', '', undefined).path, '/v1/batches');
});

test('a form’s model field is judged; one naming the endpoint is re-encoded with its model', async () => {
  const ep = endpoint('whisper-1');
  const form = new FormData();
  form.set('file', new Blob(['RIFF....']), 'a.wav');
  form.set('model', 'cheap');
  const req = new Request('http://x', { method: 'POST', body: form });
  const raw = Buffer.from(await req.arrayBuffer());
  const pinned = await pinForm(ep, raw, { 'content-type': req.headers.get('content-type')! });
  assert.ok(pinned);
  const back = await new Response(new Uint8Array(pinned.raw), {
    headers: { 'content-type': String(pinned.headers['content-type']) },
  }).formData();
  assert.equal(back.get('model'), 'whisper-1');
  assert.equal(await (back.get('file') as File).text(), 'RIFF....');
  form.set('model', 'gpt-4o-transcribe');
  const other = new Request('http://x', { method: 'POST', body: form });
  await assert.rejects(
    pinForm(ep, Buffer.from(await other.arrayBuffer()), {
      'content-type': other.headers.get('content-type')!,
    }),
    (e: any) => e.name === 'FORBIDDEN' && /gpt-4o-transcribe in its form/.test(e.detail),
  );
  const encoded = Buffer.from('model=gpt-4o&prompt=x');
  await assert.rejects(
    pinForm(ep, encoded, { 'content-type': 'application/x-www-form-urlencoded' }),
    (e: any) => e.name === 'FORBIDDEN',
  );
  assert.equal(
    await pinForm(ep, Buffer.from('model=whisper-1'), {
      'content-type': 'application/x-www-form-urlencoded',
    }),
    undefined,
    'a form naming the endpoint’s model goes as it came',
  );
});
