// The runtime: the only code that touches the operating system (DESIGN.md §1). Controllers use the
// RuntimeDriver interface; the local Linux driver implements it with bubblewrap, cgroups and netns.
export * from './driver.js';
export { FakeDriver } from './fake.js';
export { type CgroupHost, SandboxCgroup } from './linux/cgroup.js';
export { SANDBOX_ENV_FILE } from './linux/create.js';
export { type SandboxPaths, sandboxPaths } from './linux/host.js';
export { SANDBOX_SOCKET, SANDBOX_SOCKET_DIR } from './linux/launch.js';
export {
  createLinuxDriver,
  DEFAULT_NET_POOL,
  DEFAULT_UID_BASE,
  imageRootsInUse,
  LinuxDriver,
  type LinuxDriverOptions,
} from './linux/linux-driver.js';
export { SANDBOX_NET } from './linux/network.js';
export { WARM_SPEC } from './linux/warm-pool.js';
export { importArchive } from './images/archive.js';
export { ImageError } from './images/errors.js';
export { ImageStore, type StoredImage } from './images/image-store.js';
export { type DeriveOptions, deriveImage } from './images/derive.js';
