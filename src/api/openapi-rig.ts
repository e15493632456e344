/**
 * OpenAPI route declarations (src/api/openapi.ts) for the rig (docs/rig.md): agents, hooks, mail, nudges,
 * the witness, health and the .chipset/state export. Roles and the agent claim are checked per route.
 */
import { z } from "zod";
import { emptyBody } from "./schemas.js";
import { attemptBody, completeBody, mailBody, mailQuery, registerBody, setHookBody, waitQuery, witnessPatch } from "./rig.js";
import {
  agentRecordOut,
  agentsResponse,
  deletedResponse,
  hookFileOut,
  hookReadOut,
  mailboxResponse,
  mailMessageOut,
  mailViewOut,
  nudgesResponse,
  registerAgentResponse,
  rigHealthOut,
  rigSettingsOut,
} from "./responses.js";
import { S, body, client, ok, type ApiRoute } from "./openapi-route.js";

/**
 * The mail body as documented: its payload is any JSON value, which the validator defines recursively
 * (a `$ref` into the schema's own `$defs`, which a path-level schema in the document cannot resolve).
 */
const mailBodyDoc = mailBody.extend({ payload: z.union([z.string().min(1).max(100_000), z.record(z.string(), z.unknown())]) });

/** The rig: roles and the agent claim are checked per route (docs/rig.md). */
export const RIG_ROUTES: readonly ApiRoute[] = [
  { method: "put", path: `${S}/rig/agents/{agentId}`, operationId: "registerAgent", summary: "Register an agent (mayor, operator)", auth: client("rig"), body: body(registerBody), responses: { 201: ok(registerAgentResponse, "Registered"), 200: ok(registerAgentResponse, "Already registered the same way") } },
  { method: "get", path: `${S}/rig/agents`, operationId: "listAgents", summary: "Agents with their hook and health", auth: client("rig"), responses: { 200: ok(agentsResponse) } },
  { method: "delete", path: `${S}/rig/agents/{agentId}`, operationId: "deregisterAgent", summary: "Deregister an agent whose hook is empty (mayor)", auth: client("rig"), responses: { 200: ok(deletedResponse) } },
  { method: "post", path: `${S}/rig/agents/{agentId}/terminate`, operationId: "terminateAgent", summary: "Abort a conversation agent's work (mayor)", auth: client("rig"), body: body(emptyBody, false), responses: { 200: ok(agentRecordOut) } },
  { method: "get", path: `${S}/rig/agents/{agentId}/hook`, operationId: "getAgentHook", summary: "An agent's hook (ETag, Hook-Attempt); ?wait= long-polls until it is not empty", auth: client("rig"), query: waitQuery, responses: { 200: ok(hookReadOut) } },
  { method: "put", path: `${S}/rig/agents/{agentId}/hook`, operationId: "setHook", summary: "empty -> pending (mayor); If-Match makes it conditional", auth: client("rig"), body: body(setHookBody), responses: { 200: ok(hookFileOut) } },
  { method: "delete", path: `${S}/rig/agents/{agentId}/hook`, operationId: "clearHook", summary: "pending, active or completed -> empty (mayor): completed after verifying, pending or active to reassign the work", auth: client("rig"), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/hook`, operationId: "ownHook", summary: "The calling agent's hook; ?wait= long-polls until it is not empty", auth: client("rig"), query: waitQuery, responses: { 200: ok(hookReadOut) } },
  { method: "post", path: `${S}/rig/hook/activate`, operationId: "activateHook", summary: "pending -> active (the owning agent; attempt required)", auth: client("rig"), body: body(attemptBody), responses: { 200: ok(hookFileOut) } },
  { method: "post", path: `${S}/rig/hook/touch`, operationId: "touchHook", summary: "Update last_activity (throttled; attempt required)", auth: client("rig"), body: body(attemptBody), responses: { 200: ok(hookFileOut) } },
  { method: "post", path: `${S}/rig/hook/complete`, operationId: "completeHook", summary: "active -> completed (the owning agent; attempt required)", auth: client("rig"), body: body(completeBody), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/mail`, operationId: "listMail", summary: "The caller's mailbox, a page by cursor (?after=&limit=, next while more remain)", auth: client("rig"), query: mailQuery, responses: { 200: ok(mailboxResponse) } },
  { method: "post", path: `${S}/rig/mail`, operationId: "sendMail", summary: "Send durable mail", auth: client("rig"), body: body(mailBodyDoc), responses: { 201: ok(mailMessageOut, "Sent") } },
  { method: "post", path: `${S}/rig/mail/{mailId}/ack`, operationId: "ackMail", summary: "Acknowledge a message", auth: client("rig"), body: body(emptyBody, false), responses: { 200: ok(mailViewOut) } },
  { method: "get", path: `${S}/rig/nudges`, operationId: "nudges", summary: "Nudges for an external agent since it last asked; ?wait= long-polls", auth: client("rig"), query: waitQuery, responses: { 200: ok(nudgesResponse) } },
  { method: "get", path: `${S}/rig/witness`, operationId: "getWitness", summary: "The witness's settings", auth: client("rig"), responses: { 200: ok(rigSettingsOut) } },
  { method: "patch", path: `${S}/rig/witness`, operationId: "patchWitness", summary: "Change the witness's settings (mayor, operator)", auth: client("rig"), body: body(witnessPatch), responses: { 200: ok(rigSettingsOut) } },
  { method: "get", path: `${S}/rig/health`, operationId: "rigHealth", summary: "RigHealthReport", auth: client("rig"), responses: { 200: ok(rigHealthOut) } },
  { method: "get", path: `${S}/rig/chipset/state/hooks/{file}`, operationId: "hookFile", summary: "A hook as .chipset/state/hooks/{agent_id}.json", auth: client("rig"), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/chipset/state`, operationId: "chipsetExport", summary: "The .chipset/state tree as a tar archive", auth: client("rig"), responses: { 200: { description: "application/x-tar", text: true } } },
];
