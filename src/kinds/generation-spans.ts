/**
 * The attributes of a generation's `chat {model}` span (OpenTelemetry GenAI conventions, the names in
 * src/core/telemetry-genai.ts): the provider and requested model when the request starts; the response
 * model and id, token counts and finish reason when the answer is in. An errored answer (a provider
 * error is an answer with stopReason `error`, not a throw) also carries `error.type`.
 */
import type { AssistantMessage, Model, Api } from "@earendil-works/pi-ai";
import { finishReason, GenAiAttr } from "../core/telemetry-genai.js";
import type { Span, SpanAttributes } from "../core/telemetry.js";

export function chatRequestAttributes(model: Pick<Model<Api>, "provider" | "id">): SpanAttributes {
  return {
    [GenAiAttr.operationName]: "chat",
    [GenAiAttr.providerName]: model.provider,
    [GenAiAttr.requestModel]: model.id,
  };
}

export function chatResponseAttributes(message: AssistantMessage): SpanAttributes {
  return {
    [GenAiAttr.responseModel]: message.responseModel ?? message.model,
    ...(message.responseId === undefined ? {} : { [GenAiAttr.responseId]: message.responseId }),
    [GenAiAttr.inputTokens]: message.usage.input,
    [GenAiAttr.outputTokens]: message.usage.output,
    [GenAiAttr.finishReasons]: [finishReason(message.stopReason)],
    ...(message.stopReason === "error" ? { [GenAiAttr.errorType]: "provider_error" } : {}),
  };
}

/** Sets the response attributes and the status (error for an errored answer) and ends the span. */
export function endChatSpan(span: Span, message: AssistantMessage): void {
  for (const [key, value] of Object.entries(chatResponseAttributes(message))) span.setAttribute(key, value);
  if (message.stopReason === "error") span.setStatus("error", message.errorMessage ?? "provider error");
  else span.setStatus("ok");
  span.end();
}
