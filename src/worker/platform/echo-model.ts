/**
 * The built-in deterministic model `echo` (provider `echo`), so the service works offline (`npm start`
 * without an API key) and end-to-end tests need no network. It answers with the text of the last user
 * message. When that text starts with `/call NAME {json}`, it first answers with a tool call of NAME
 * with those arguments (stopReason `toolUse`); on the next request, whose last message is the tool
 * result, it answers with the result's text. When that text is `/instructions`, it answers with the
 * instructions its request carried: the system messages' sections folded in order (a later message
 * replaces a section by name, null removes it), each section's text separated by a blank line.
 *
 * Built from pi-ai's public parts: the faux provider's core streams a message the way real providers
 * do (start, deltas, done), fed one response factory per request; `createProvider` wraps it. A second
 * model, `echo-slow`, paces the same answers so a live turn can be watched and aborted. The answer names each image
 * the user message carried after its text (`[image image/png]`, or `[image {url}]` for one named by URL), so a test
 * sees what reached the model; a third, `echo-text`, answers the same but takes no images (its input is text only).
 */
import {
  contentText,
  createFauxCore,
  createProvider,
  fauxAssistantMessage,
  fauxText,
  fauxToolCall,
  type AssistantMessage,
  type JsonObject,
  type Message,
  type Provider,
} from "@earendil-works/pi-ai";
import { imageUrlOf } from "../../kinds/image-urls.js";

export const ECHO_PROVIDER = "echo";
export const ECHO_MODEL = "echo";
export const ECHO_SLOW_MODEL = "echo-slow";
export const ECHO_TEXT_MODEL = "echo-text";

const CALL = /^\/call\s+([A-Za-z0-9_.-]+)\s*([\s\S]*)$/;

function textOf(message: Message): string {
  switch (message.role) {
    case "user":
    case "toolResult":
      return contentText(message.content);
    case "assistant":
      return message.content.map((block) => (block.type === "text" ? block.text : "")).join("");
    case "system":
      return "";
    default: {
      const never: never = message;
      return never;
    }
  }
}

/** The instructions a request carried: the system messages' content and sections, folded in order. */
export function instructionsOf(messages: readonly Message[]): string {
  const sections = new Map<string, string>();
  const texts: string[] = [];
  for (const message of messages) {
    if (message.role !== "system") continue;
    const content = typeof message.content === "string" ? message.content : contentText(message.content);
    if (content !== "") texts.push(content);
    for (const [name, text] of Object.entries(message.sections ?? {})) {
      if (text === null) sections.delete(name);
      else sections.set(name, text);
    }
  }
  return [...texts, ...sections.values()].join("\n\n");
}

/** The images of a user message as the echo answer names them: `[image {type}]`, or `[image {url}]` (image-urls.ts). */
function imagesOf(message: Message | undefined): string[] {
  if (message?.role !== "user" || typeof message.content === "string") return [];
  return message.content.flatMap((block) =>
    block.type === "image" ? [`[image ${imageUrlOf(block.data) ?? block.mimeType}]`] : [],
  );
}

/** The echo model's answer to a transcript (pure; exported for tests). */
export function echoReply(context: { readonly messages: readonly Message[] }): AssistantMessage {
  const messages = context.messages;
  const last = messages[messages.length - 1];
  if (last?.role === "toolResult") {
    return fauxAssistantMessage(textOf(last) === "" ? `${last.toolName} returned nothing` : textOf(last));
  }
  let user: Message | undefined;
  for (let i = messages.length - 1; i >= 0 && user === undefined; i--)
    if (messages[i]?.role === "user") user = messages[i];
  const text = user === undefined ? "" : textOf(user);
  if (text.trim() === "/instructions") {
    const instructions = instructionsOf(messages);
    return fauxAssistantMessage(instructions === "" ? "(no instructions)" : instructions);
  }
  const call = CALL.exec(text);
  if (call === null) {
    const answer = [text, ...imagesOf(user)].filter((part) => part !== "").join(" ");
    return fauxAssistantMessage(answer === "" ? "(nothing to echo)" : answer);
  }
  const name = call[1] ?? "";
  const raw = (call[2] ?? "").trim();
  let args: unknown = {};
  if (raw !== "") {
    try {
      args = JSON.parse(raw);
    } catch {
      return fauxAssistantMessage(`echo: the arguments of /call ${name} are not JSON: ${raw}`);
    }
  }
  if (args === null || typeof args !== "object" || Array.isArray(args))
    return fauxAssistantMessage(`echo: the arguments of /call ${name} must be a JSON object`);
  // A deterministic call id: the position of the request in the transcript.
  const toolCall = fauxToolCall(name, args as JsonObject, { id: `echo_call_${messages.length}` });
  return fauxAssistantMessage([fauxText(`Calling ${name}.`), toolCall], { stopReason: "toolUse" });
}

/** Streaming pace of `echo-slow`: 16-character chunks at 20 tokens/s, about 200 ms per chunk. */
const SLOW_TOKENS_PER_SECOND = 20;

/**
 * The `echo` provider with two models: `echo` streams at once; `echo-slow` answers the same but paces
 * its stream (about 200 ms per 16 characters), so a turn stays live long enough to watch, steer or abort
 * it by hand (README walkthrough, busy and abort tests).
 */
export function echoProvider(): Provider {
  const definition = (id: string, name: string, input: ("text" | "image")[] = ["text", "image"]) => ({
    id,
    name,
    reasoning: false,
    input,
    contextWindow: 1_000_000,
    maxTokens: 100_000,
  });
  // Fixed chunk sizes: the same text always streams in the same deltas.
  const fast = createFauxCore({
    api: "echo",
    provider: ECHO_PROVIDER,
    models: [
      definition(ECHO_MODEL, "Echo (built-in, deterministic)"),
      definition(ECHO_TEXT_MODEL, "Echo, text only (built-in, deterministic)", ["text"]),
    ],
    tokenSize: { min: 4, max: 4 },
  });
  const slow = createFauxCore({
    api: "echo",
    provider: ECHO_PROVIDER,
    models: [definition(ECHO_SLOW_MODEL, "Echo, paced (built-in, deterministic)")],
    tokenSize: { min: 4, max: 4 },
    tokensPerSecond: SLOW_TOKENS_PER_SECOND,
  });
  const coreOf = (model: { readonly id: string }): typeof fast => (model.id === ECHO_SLOW_MODEL ? slow : fast);
  return createProvider({
    id: ECHO_PROVIDER,
    name: "Echo",
    auth: { apiKey: { name: "none", resolve: async () => ({ auth: {} }) } },
    models: [...fast.models, ...slow.models],
    api: {
      // The faux core answers from a queue; one factory is queued per request and taken at once.
      stream: (model, context, options) => {
        const core = coreOf(model);
        core.appendResponses([() => echoReply(context)]);
        return core.stream(model, context, options);
      },
      streamSimple: (model, context, options) => {
        const core = coreOf(model);
        core.appendResponses([() => echoReply(context)]);
        return core.streamSimple(model, context, options);
      },
    },
  });
}
