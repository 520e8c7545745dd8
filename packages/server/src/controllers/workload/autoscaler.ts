// How many replicas an agent or function wants, Knative's KPA decision (pkg/autoscaler/scaling/autoscaler.go) as
// a pure function of the concurrency samples, the ready replicas and the time passed in: a stable average over
// 60 s, a panic average over 6 s, panic mode at twice the ready capacity (and no scale-down while in it, until a
// stable window passes under the threshold), scale rates per decision, an optional scale-down delay, and the
// object's minScale/maxScale. The workload controller's scaler applies what it returns (scaler.ts); the gateway
// only reports the concurrency it sees (each replica's requests in flight, the requests waiting for a replica).

/** Knative's defaults (config-autoscaler), kept: each has a long record in production. */
export const STABLE_WINDOW_MS = 60_000;
export const PANIC_WINDOW_MS = 6_000;
/** Panic when the panic-window demand reaches this multiple of the ready capacity. */
export const PANIC_THRESHOLD = 2;
/** Up to this many times the ready replicas per decision. */
export const MAX_SCALE_UP_RATE = 1000;
/** Down to ready / this per decision. */
export const MAX_SCALE_DOWN_RATE = 2;
/** Decision period. */
export const TICK_MS = 2_000;

export interface ScaleSpec {
  /** In-flight requests one replica is meant to hold. */
  target: number;
  minScale: number;
  maxScale: number;
  /** Decisions to scale down are held for this long (the largest desired count of the window wins); 0 = none. */
  scaleDownDelayMs?: number;
}

/** Total in-flight requests (held ones included) at one instant. */
export interface Sample {
  timeMs: number;
  concurrency: number;
}

/** What the decision carries from one tick to the next (held by the caller, replaced by each result). */
export interface ScaleState {
  panicSinceMs?: number;
  maxPanicPods: number;
  /** Recent desired counts, for the scale-down delay. */
  recent: { timeMs: number; desired: number }[];
}

export const initialScaleState = (): ScaleState => ({ maxPanicPods: 0, recent: [] });

export interface ScaleDecision {
  desired: number;
  panicking: boolean;
  stableConcurrency: number;
  panicConcurrency: number;
  state: ScaleState;
}

function average(samples: Sample[], fromMs: number): number {
  const inWindow = samples.filter((s) => s.timeMs > fromMs);
  if (!inWindow.length) return 0;
  return inWindow.reduce((a, s) => a + s.concurrency, 0) / inWindow.length;
}

export function decide(
  spec: ScaleSpec,
  samples: Sample[],
  readyPods: number,
  nowMs: number,
  prev: ScaleState,
): ScaleDecision {
  const ready = Math.max(1, readyPods);
  const stable = average(samples, nowMs - STABLE_WINDOW_MS);
  const panic = average(samples, nowMs - PANIC_WINDOW_MS);
  const dspc = Math.ceil(stable / spec.target);
  const dppc = Math.ceil(panic / spec.target);
  const maxUp = Math.ceil(MAX_SCALE_UP_RATE * ready);
  const maxDown = Math.floor(ready / MAX_SCALE_DOWN_RATE);
  const desiredStable = Math.min(Math.max(dspc, maxDown), maxUp);
  const desiredPanic = Math.min(Math.max(dppc, maxDown), maxUp);
  const state: ScaleState = { ...prev, recent: [...prev.recent] };
  const over = dppc / ready >= PANIC_THRESHOLD;
  if (over) state.panicSinceMs = nowMs;
  else if (state.panicSinceMs !== undefined && nowMs - state.panicSinceMs >= STABLE_WINDOW_MS) {
    state.panicSinceMs = undefined;
    state.maxPanicPods = 0;
  }
  const panicking = state.panicSinceMs !== undefined;
  let desired = desiredStable;
  if (panicking) {
    desired = Math.max(desiredStable, desiredPanic);
    // No scale-down while panicking: the count only grows until the panic ends.
    if (desired > state.maxPanicPods) state.maxPanicPods = desired;
    else desired = state.maxPanicPods;
  }
  if (spec.scaleDownDelayMs) {
    state.recent = state.recent.filter((r) => r.timeMs > nowMs - spec.scaleDownDelayMs!);
    state.recent.push({ timeMs: nowMs, desired });
    desired = Math.max(...state.recent.map((r) => r.desired));
  }
  desired = Math.min(Math.max(desired, spec.minScale), spec.maxScale);
  return { desired, panicking, stableConcurrency: stable, panicConcurrency: panic, state };
}
