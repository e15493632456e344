/**
 * The built-in `new_context` tool (§8.3): the model asks for a fresh context that starts with its own
 * handoff message. The tool only records the request (out.handoff); post_tools writes the handoff head
 * after the exchange is complete, never inside the tool, because a head landing mid-exchange would cut
 * it in half. Two different handoffs in one response reject rather than pick an order.
 */
import type { Tool } from "../kinds/services.js";
import type { JsonObject } from "../storage/records.js";

export interface NewContextParams extends JsonObject {
  message: string;
}

export const newContextTool: Tool<NewContextParams> = {
  name: "new_context",
  description:
    "Start a fresh context after this exchange. `message` is the handoff: everything the next context needs to continue (goal, state, next steps); the earlier conversation will no longer be visible.",
  parameters: {
    type: "object",
    properties: {
      message: { type: "string", minLength: 1, description: "The handoff message the new context starts with." },
    },
    required: ["message"],
    additionalProperties: false,
  },
  replay: "safe",
  async execute(_toolCallId, params, out) {
    out.handoff(params.message);
    out.write("The context will be reset after this exchange; it continues from the handoff message.");
  },
};
