/**
 * The AG-UI 1.0 wire (docs/api.md "AG-UI"): the `RunAgentInput` body `POST /v1/sessions/{session}/ag-ui` takes,
 * read as this server needs it. Fields AG-UI clients send that the server does not use (`state`, `context`,
 * `forwardedProps`, a message's `metadata`) are allowed and ignored; the ones it uses are checked strictly.
 */
import { z } from "zod";
import { jsonValue } from "./responses.js";
import { TOOL_LIMITS, toolName } from "./tools.js";

const id = z.string().min(1).max(200);

const textPart = z.object({ type: z.literal("text"), text: z.string() });
/** Content as AG-UI carries it: a string, or parts (only text parts are accepted here). */
const content = z.union([z.string(), z.array(textPart)]);
/**
 * A user message's content: a string, or text and media parts (`image`, `document`, ...: read, and refused naming the
 * part when they are not images a model can take, by the frontends' one reader, worker/frontends/content-parts.ts).
 */
const userContent = z.union([z.string(), z.array(z.looseObject({ type: z.string().min(1).max(200) })).max(1000)]);

const toolCall = z.object({
  id,
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const agUiMessage = z.discriminatedUnion("role", [
  z.object({ id, role: z.literal("user"), content: userContent }),
  z.object({
    id,
    role: z.literal("assistant"),
    content: z.string().optional(),
    toolCalls: z.array(toolCall).optional(),
  }),
  z.object({ id, role: z.literal("tool"), toolCallId: id, content, error: z.string().optional() }),
  z.object({ id, role: z.literal("system") }),
  z.object({ id, role: z.literal("developer") }),
  z.object({ id, role: z.literal("reasoning") }),
  z.object({ id, role: z.literal("activity") }),
]);
export type AgUiMessage = z.output<typeof agUiMessage>;

/**
 * A tool the page offers for this run: a client tool of the run's turn. Its name follows the catalog's rule
 * (every provider accepts it), its parameters are a JSON Schema object (`"type": "object"`).
 */
export const agUiTool = z.object({
  name: toolName,
  description: z
    .string()
    .max(TOOL_LIMITS.descriptionChars, `description is at most ${TOOL_LIMITS.descriptionChars} characters`),
  /** Absent or `{}`: no arguments (`{ "type": "object", "properties": {} }`). */
  parameters: z
    .record(z.string(), jsonValue, { error: 'parameters is a JSON Schema object with "type": "object"' })
    .refine(
      (schema) => Object.keys(schema).length === 0 || schema["type"] === "object",
      'parameters is a JSON Schema with "type": "object"',
    )
    .optional(),
});

/**
 * An answer to an interrupt of a previous run: the interrupt id is the pending approval's id. `resolved` answers it
 * with its payload: `true`/`false`, `{ approve, reason? }`, or any other value (an approval: anything but `false` or
 * `{ approve: false }` approves); absent approves. `cancelled` denies it.
 */
export const agUiResume = z.object({
  interruptId: id,
  status: z.enum(["resolved", "cancelled"]),
  payload: jsonValue.optional(),
});
export type AgUiResume = z.output<typeof agUiResume>;

/** `RunAgentInput` (AG-UI 1.0): `threadId` names a chat (a pointer to a branch, docs/frontends.md). `tools`, `context` optional. */
export const runAgentInput = z.object({
  threadId: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, "a thread id is 1-128 characters A-Z a-z 0-9 _ -"),
  runId: id,
  parentRunId: z.string().optional(),
  protocolVersion: z.string().optional(),
  state: z.unknown().optional(),
  messages: z.array(agUiMessage).max(10_000),
  tools: z.array(agUiTool).max(128).default([]),
  context: z.array(z.object({ description: z.string(), value: z.string() })).default([]),
  forwardedProps: z.unknown().optional(),
  resume: z.array(agUiResume).max(128).optional(),
});
export type RunAgentInputBody = z.output<typeof runAgentInput>;
