/**
 * The rig (docs/rig.md): Gastown hooks, mail, nudges and the witness patrol over the core's
 * commits, state and tasks. No Cloudflare, Hono or zod here; the HTTP routes live in src/worker/.
 */
export {
  Rig,
  type AgentListing,
  type RegisterRequest,
  type RigOptions,
  type TransitionRequest,
  type TransitionResult,
} from "./rig.js";
export { guppRequestId, workInput, type AcceptWork, type AnswerBoundary } from "./gupp-commits.js";
export { MAIL_PAGE, type MailPage, type MailView } from "./mail.js";
export { checkAgentId } from "./access.js";
export { RigError, type RigErrorCode } from "./errors.js";
export { checkRole, checkStatus, serializeSorted } from "./hooks.js";
export { NudgeBus } from "./nudges.js";
export { Gupp } from "./gupp.js";
export {
  assess,
  classifyStall,
  createWitnessKind,
  patrol,
  WITNESS_KIND,
  type PatrolOutcome,
  type WitnessKind,
  type WitnessState,
} from "./witness.js";
export * from "./types.js";
