// Drives an agent and a function with the unmodified @blaxel/core pointed at Berth (env from the parent test):
// blAgent(name).run() and the SDK's MCP helper listing a function's tools; prints one `RESULT <json>` line.
import { blAgent, getTool } from '@blaxel/core';

const out = {};
if (process.env.AGENT_NAME) {
  const agent = blAgent(process.env.AGENT_NAME);
  // run() of @blaxel/core 0.3.21 reads the response body twice (once for its tracing span), so it throws
  // "Body is unusable" against any server; call() is the request run() makes, with the same URL and headers.
  try {
    out.agent = await agent.run({ inputs: 'from the sdk' });
  } catch (err) {
    out.runError = err.message;
    out.agent = await (await agent.call(agent.url, { inputs: 'from the sdk' })).text();
  }
}
if (process.env.FUNCTION_NAME) {
  const tools = await getTool(process.env.FUNCTION_NAME);
  out.tools = tools.map((t) => t.name);
}
console.log(`RESULT ${JSON.stringify(out)}`);
process.exit(0);
