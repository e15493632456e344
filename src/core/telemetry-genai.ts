/**
 * The OpenTelemetry GenAI semantic conventions this project follows (semconv 1.37.0), as plain data: span
 * names and attribute keys, and how pico's values map onto them. Core and kinds build spans from these;
 * nothing here depends on OpenTelemetry (src/core/telemetry.ts is the seam). docs/operations.md lists them.
 *
 *   invoke_agent            one turn of a conversation (driver-turn-spans.ts)
 *     pico.task.<method>    each task invocation of the turn (driver-dispatch.ts)
 *       chat {model}        one model request of a generation attempt (kinds/generation.ts)
 *       execute_tool {name} one tool call's execution (kinds/tool.ts)
 *       pico.pending {type} a wait for an approval or a client tool's output (kinds/tool-catalog-call.ts)
 */

/** The semantic conventions version the names and attributes below follow. */
export const GENAI_SEMCONV_VERSION = "1.37.0";
/** The schema URL of that version (an OTLP scope's `schemaUrl`). */
export const GENAI_SCHEMA_URL = `https://opentelemetry.io/schemas/${GENAI_SEMCONV_VERSION}`;

export const GenAiAttr = {
  operationName: "gen_ai.operation.name",
  providerName: "gen_ai.provider.name",
  conversationId: "gen_ai.conversation.id",
  agentName: "gen_ai.agent.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  responseId: "gen_ai.response.id",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  errorType: "error.type",
} as const;

export type GenAiOperation = "invoke_agent" | "chat" | "execute_tool";

/** The agent name `invoke_agent` spans carry. */
export const AGENT_NAME = "pico";

export const INVOKE_AGENT_SPAN = "invoke_agent";

/** `chat {gen_ai.request.model}` (the conventions' `{operation} {model}`). */
export function chatSpanName(model: string): string {
  return `chat ${model}`;
}

/** `execute_tool {gen_ai.tool.name}`. */
export function executeToolSpanName(tool: string): string {
  return `execute_tool ${tool}`;
}

/** A wait for a person or a frontend (an approval, a client tool's output): `pico.pending {type}`. */
export function pendingSpanName(type: string): string {
  return `pico.pending ${type}`;
}

/** pi-ai's stop reasons as the conventions' finish reasons (OpenAI's spelling, which the examples use). */
export type ModelStopReason = "pending" | "stop" | "length" | "toolUse" | "error" | "aborted" | "deferred";

export function finishReason(stop: ModelStopReason): string {
  switch (stop) {
    case "stop":
      return "stop";
    case "length":
      return "length";
    case "toolUse":
      return "tool_calls";
    case "error":
      return "error";
    case "aborted":
      return "aborted";
    case "deferred":
      return "deferred";
    case "pending":
      return "pending";
    default: {
      const never: never = stop;
      return String(never);
    }
  }
}
