// Drives with the unmodified @blaxel/core SDK pointed at Berth: a drive created and at once mounted live into two
// running sandboxes (one writes, the other reads), listed, unmounted, mounted in a new sandbox and read back, deleted.
// Prints one `RESULT <json>` line.
import { DriveInstance, SandboxInstance } from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const out = {};

// As the SDK's own drive tests do: the sandboxes first, then a drive mounted as soon as its create answers.
const one = await SandboxInstance.create({ name: 'sdk-drive-one', memory });
const two = await SandboxInstance.create({ name: 'sdk-drive-two', memory });
const created = await DriveInstance.create({ name: 'sdk-drive' });
out.created = created.name;
out.status = created.status;
out.mount = await one.drives.mount({ driveName: 'sdk-drive', mountPath: '/home/user/drive' });
await two.drives.mount({ driveName: 'sdk-drive', mountPath: '/tmp/drive', readOnly: true });
await one.fs.write('/home/user/drive/note.txt', 'shared through a drive');
out.readByTwo = await two.fs.read('/tmp/drive/note.txt');
out.list = await two.drives.list();
out.unmount = await two.drives.unmount('/tmp/drive');
out.listAfter = await two.drives.list();
await SandboxInstance.delete('sdk-drive-one');
await SandboxInstance.delete('sdk-drive-two');

const three = await SandboxInstance.create({ name: 'sdk-drive-three', memory });
await three.drives.mount({ driveName: 'sdk-drive', mountPath: '/home/user/again' });
out.readBack = await three.fs.read('/home/user/again/note.txt');
await SandboxInstance.delete('sdk-drive-three');
await DriveInstance.delete('sdk-drive');
try {
  await DriveInstance.get('sdk-drive');
  out.afterDelete = 'found';
} catch (e) {
  out.afterDelete = e.code ?? e.status;
}
console.log(`RESULT ${JSON.stringify(out)}`);
