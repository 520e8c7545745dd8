// Public surface of the server package, used by the CLI and by tests.
export { type Config, loadConfig } from './config.js';
export { KINDS, kindByName } from './kinds/index.js';
export { type RunningServer, startServer } from './main.js';
export { SERVER_UMASK } from './store/data-dir.js';
