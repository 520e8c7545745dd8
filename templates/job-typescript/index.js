// A batch job task: blStartJob fetches this task's input (BL_EXECUTION_DATA_URL, TASK_INDEX) and calls the
// function with it; the process exits 0 when the function returns and 1 when it throws (Berth then retries it).
//   {"name": "x"}            prints a greeting
//   {"sleep": 2}             works for that many seconds first
//   {"failAttempts": 2}      fails its first two attempts (BL_TASK_ATTEMPT counts them), then succeeds
import { blStartJob } from '@blaxel/core';

blStartJob(async (input) => {
  const index = process.env.TASK_INDEX;
  const attempt = Number(process.env.BL_TASK_ATTEMPT ?? '1');
  console.log(
    `task ${index} attempt ${attempt} of execution ${process.env.BL_EXECUTION_ID}: ${JSON.stringify(input)}`,
  );
  if (input.env) console.log(`env ${input.env}=${process.env[input.env] ?? ''}`);
  if (input.sleep) await new Promise((r) => setTimeout(r, Number(input.sleep) * 1000));
  if (attempt <= Number(input.failAttempts ?? 0)) throw new Error(`failing attempt ${attempt} on purpose`);
  console.log(`hello, ${input.name ?? 'world'}`);
  console.log(`MARKER task=${index} attempt=${attempt} done`);
});
