/**
 * The pico v3 core: runtime-agnostic records, transactions, the commit line, context derivation, state
 * and handles. No Cloudflare, Hono or zod imports live under src/core.
 */
export * from "./call.js";
export * from "./context.js";
export * from "./conversation.js";
export * from "./entries.js";
export * from "./env.js";
export * from "./errors.js";
export * from "./harness.js";
export * from "./line.js";
export * from "./state.js";
export * from "./task-kind.js";
export * from "./tx.js";
export * from "./validate.js";
export { Driver, type InspectResult, type Invocation, type Phase } from "./driver.js";
export * from "./host.js";
export { createRuntime, releaseRuntime, startPreview, type TaskRuntime } from "./runtime.js";
export * from "./inbox.js";
export * from "./hooks.js";
export * from "./watch.js";
