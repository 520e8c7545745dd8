// The one wording of what a node that left (killed, cut off past its lease, drained) took with it, for every object
// that ran there: a sandbox (sandbox-lost.ts), an agent's or function's replicas (workload/replicas-lost.ts), a job
// execution's tasks and each task's attempt (job/job-runner.ts). It names the node, says what is gone, and what
// happens next, so an operator reading any of them sees the same story.
export const lostOnNode = (node: string, ran: string, gone: string, next: string) =>
  `lost: node ${node}, which ran ${ran}, stopped; ${gone}. ${next}`;
