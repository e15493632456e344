/**
 * An MCP tool call's result as the model reads it (docs/mcp.md "Calling MCP tools"). The remote call
 * stores what the server answered, `{ content, structuredContent? }` (a `CallToolResult` without its
 * `isError`, which the outcome carries); the text is its text parts in order, other parts as a short
 * line naming what they are (an image, audio, a resource), and the structured content as JSON when
 * the server gave no content at all.
 */
import type { JsonObject, JsonValue } from "../storage/records.js";

/** The text an MCP result stands for (anything not shaped like one: its JSON). */
export function mcpResultText(output: JsonValue): string {
  if (typeof output === "string") return output;
  const content = isObject(output) ? output["content"] : undefined;
  if (!isObject(output) || !Array.isArray(content)) return JSON.stringify(output);
  const parts = (content as readonly JsonValue[]).map(partText);
  const structured = output["structuredContent"];
  if (parts.length === 0 && structured !== undefined) return JSON.stringify(structured);
  return parts.join("\n");
}

function partText(part: JsonValue): string {
  if (!isObject(part)) return JSON.stringify(part);
  const type = part["type"];
  switch (type) {
    case "text":
      return typeof part["text"] === "string" ? part["text"] : "";
    case "image":
    case "audio":
      return `[${type}${typeof part["mimeType"] === "string" ? ` ${part["mimeType"]}` : ""}]`;
    case "resource_link":
      return `[resource ${String(part["uri"])}${typeof part["name"] === "string" ? ` (${part["name"]})` : ""}]`;
    case "resource": {
      const resource = part["resource"];
      if (isObject(resource) && typeof resource["text"] === "string") return resource["text"];
      return `[resource ${isObject(resource) ? String(resource["uri"]) : "?"}]`;
    }
    default:
      return JSON.stringify(part);
  }
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value);
}
