// Drives volumes with the unmodified @blaxel/core SDK pointed at Berth: a volume mounted in a sandbox, written,
// the sandbox deleted and created again with the same volume, read back; a volume found by its externalId, a
// resize refused, a deleted volume gone. Prints one `RESULT <json>` line.
import {
  createVolume,
  getVolumeByExternalId,
  SandboxInstance,
  updateVolume,
  VolumeInstance,
} from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const out = {};

const vol = await VolumeInstance.create({ name: 'sdk-vol', size: 32 });
out.volume = { name: vol.name, size: vol.size };
const volumes = [{ name: 'sdk-vol', mountPath: '/data', readOnly: false }];

const first = await SandboxInstance.create({ name: 'sdk-vol-one', memory, volumes });
out.first = first.status;
await first.fs.write('/data/note.txt', 'kept across sandboxes');
out.attached = (await VolumeInstance.get('sdk-vol')).volume.state?.attachedTo;
await SandboxInstance.delete('sdk-vol-one');
for (let i = 0; i < 200; i++) {
  const v = await VolumeInstance.get('sdk-vol');
  if (!v.volume.state?.attachedTo) break;
  await new Promise((r) => setTimeout(r, 50));
}

const second = await SandboxInstance.create({ name: 'sdk-vol-two', memory, volumes });
out.readBack = await second.fs.read('/data/note.txt');
await SandboxInstance.delete('sdk-vol-two');

// A volume found by its caller-owned id, and a resize refused (a volume's size is fixed at creation).
await createVolume({
  body: { metadata: { name: 'sdk-ext', externalId: 'job:42' }, spec: { size: 16 } },
  throwOnError: true,
});
const found = await getVolumeByExternalId({ path: { externalId: 'job:42' }, throwOnError: true });
out.byExternalId = found.data.metadata.name;
await VolumeInstance.delete('sdk-ext');
const cur = await VolumeInstance.get('sdk-vol');
const resized = await updateVolume({
  path: { volumeName: 'sdk-vol' },
  body: { metadata: cur.metadata, spec: { ...cur.spec, size: 64 } },
});
out.resize = {
  status: resized.response.status,
  code: resized.error?.code,
  error: resized.error?.error,
  pointer: resized.error?.errors?.[0]?.pointer,
};
await VolumeInstance.delete('sdk-vol');
try {
  await VolumeInstance.get('sdk-vol');
  out.afterDelete = 'found';
} catch (e) {
  out.afterDelete = e.code ?? e.status;
}
console.log(`RESULT ${JSON.stringify(out)}`);
