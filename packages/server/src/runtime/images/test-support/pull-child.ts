// Run as a separate Node process by the kill -9 test: pulls one image into a data dir and prints DONE (the test
// kills it before that, mid-download).
import { ImageStore } from '../image-store.js';
import { loopbackOutbound } from './registry.js';

const { BT_DATA_DIR, BT_IMAGE } = process.env;
await new ImageStore({ dataDir: BT_DATA_DIR as string, outbound: loopbackOutbound() }).pull(
  'ws',
  BT_IMAGE as string,
);
process.stdout.write('DONE\n');
