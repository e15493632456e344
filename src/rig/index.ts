/**
 * The rig (docs/rig.md): Gastown hooks, mail, nudges and the witness patrol over the core's
 * commits, state and tasks. No Cloudflare, Hono or zod here; the HTTP routes live in src/worker/.
 */
export { Rig, guppRequestId, workInput, type AcceptWork, type AnswerBoundary, type AgentListing, type MailPage, type MailView, MAIL_PAGE, type RegisterRequest, type RigOptions, type TransitionRequest, type TransitionResult } from "./rig.js";
export { checkAgentId } from "./access.js";
export { RigError, type RigErrorCode } from "./errors.js";
export { checkRole, checkStatus, serializeSorted } from "./hooks.js";
export { NudgeBus } from "./nudges.js";
export { Gupp } from "./gupp.js";
export { assess, classifyStall, createWitnessKind, patrol, WITNESS_KIND, type PatrolOutcome, type WitnessKind, type WitnessState } from "./witness.js";
export * from "./types.js";
