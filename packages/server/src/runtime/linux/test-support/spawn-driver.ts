// Run as a separate Node process by the survival test: creates a driver, ensures one sandbox,
// prints its info as one JSON line, then idles until killed (kill -9 is the point of the test).
import { createLinuxDriver } from '../linux-driver.js';

const { BT_DATA_DIR, BT_CODE_DIR, BT_ID } = process.env;
const driver = await createLinuxDriver({ dataDir: BT_DATA_DIR!, codeDir: BT_CODE_DIR! });
const info = await driver.ensure(BT_ID!, {
  memoryMb: 128,
  pidsMax: 64,
  cpuShares: 64,
  diskMb: 16,
  envs: {},
  image: '',
  volumes: [],
});
process.stdout.write(`${JSON.stringify(info)}\n`);
setInterval(() => undefined, 60_000);
