// Drives with the unmodified @blaxel/core SDK pointed at Berth: a drive created, mounted live into two running
// sandboxes (one writes, the other reads), listed, unmounted, then mounted in a new sandbox and read back.
// Prints one `RESULT <json>` line.
import { DriveInstance, SandboxInstance } from '@blaxel/core';

const memory = Number(process.env.SANDBOX_MEMORY);
const out = {};

const created = await DriveInstance.create({ name: 'sdk-drive' });
out.created = created.name;
let drive = created;
for (let i = 0; i < 200 && drive.status !== 'DEPLOYED'; i++) {
  await new Promise((r) => setTimeout(r, 50));
  drive = await DriveInstance.get('sdk-drive');
}
out.status = drive.status;

const one = await SandboxInstance.create({ name: 'sdk-drive-one', memory });
const two = await SandboxInstance.create({ name: 'sdk-drive-two', memory });
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
console.log(`RESULT ${JSON.stringify(out)}`);
