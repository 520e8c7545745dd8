// How a test starts a module of this repository in a child process: the suite runs compiled (scripts/test-build.mjs
// mirrors each module's source beside its compiled copy), so a child runs the compiled copy too, without tsx's
// hooks (about a second of CPU for a process that loads the CLI or the sandbox daemon); a test run through tsx
// starts the source through tsx as before.
const COMPILED = import.meta.url.endsWith('.js');

/** The module to import or start for the source file `tsPath`. */
export const moduleFile = (tsPath: string): string => (COMPILED ? tsPath.replace(/\.ts$/, '.js') : tsPath);

/** Node's flags for a child that runs `moduleFile`s: tsx's loader only when running from source. */
export const loaderArgs = (): string[] => (COMPILED ? [] : ['--import', 'tsx']);
