// Runs a TypeScript program of the test tree (through tsx) that ends by printing its report as one JSON line on
// stdout; its stderr (progress) passes through. Resolves with the report.
import { spawn } from 'node:child_process';

export async function runTsReport(path, env = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const code = await new Promise((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`${path} exited with ${code}`);
  return JSON.parse(out.trim().split('\n').at(-1));
}
