/**
 * The built-in `echo` tool: returns its arguments as JSON text. The offline (faux) model uses it to
 * exercise a complete tool turn without any external effect, so it is safe to replay after a crash.
 */
import type { Tool } from "../kinds/services.js";
import type { JsonObject } from "../storage/records.js";

export const echoTool: Tool<JsonObject> = {
  name: "echo",
  description: "Echo the arguments back as JSON text.",
  parameters: {
    type: "object",
    properties: { text: { type: "string", description: "Text to echo." } },
    additionalProperties: true,
  },
  replay: "safe",
  async execute(_toolCallId, params, out) {
    out.write(JSON.stringify(params));
  },
};
