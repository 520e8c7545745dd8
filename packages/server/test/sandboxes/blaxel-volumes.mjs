// Drives volumes with the unmodified @blaxel/core SDK pointed at Berth: a volume mounted in a sandbox, written,
// the sandbox deleted and created again with the same volume, read back. Prints one `RESULT <json>` line.
import { SandboxInstance, VolumeInstance } from '@blaxel/core';

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
console.log(`RESULT ${JSON.stringify(out)}`);
