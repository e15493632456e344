/**
 * An HTTP catalog tool as a registered-tool shape: its call runs as a background `remote_call` task
 * (src/kinds/remote-call.ts), started through `ToolRuntime.startRemoteCall`; the call waits for it
 * within the blocking budget (§8.3) and delegates after it, so the late result arrives as one notice.
 *
 * `replay: "safe"` holds because the side effect lives on the remote call: a re-invocation after a
 * restart gets the same remote call back (one per tool task) and waits again, with a fresh budget.
 */
import type { ToolDefinition, ToolHandler } from "./catalog-types.js";
import { outcomeText } from "./remote-call.js";
import type { AnyTool } from "./services.js";
import type { JsonObject } from "../storage/records.js";

export type HttpToolDefinition = ToolDefinition & { readonly handler: Extract<ToolHandler, { type: "http" }> };

/** The tool a captured HTTP definition runs as (`replay: "safe"`: its side effect lives on the remote call). */
export function httpTool(name: string, version: number, def: HttpToolDefinition): AnyTool {
  return {
    name,
    description: def.description,
    parameters: def.parameters,
    replay: "safe",
    async execute(_toolCallId, params, out, runtime, call) {
      const { url, timeoutMs, idempotent } = def.handler;
      const id = await runtime.startRemoteCall({ target: { type: "http", tool: name, version, url, timeoutMs, idempotent }, name, arguments: params }, call);
      const done = await runtime.waitForTask(id, { budgetMs: runtime.budgetMs }, call);
      const view = await runtime.remoteCall(id, call);
      if (!done || view.outcome === undefined) {
        out.write(`${name} is still running as remote call ${id}`);
        out.details = { remoteCall: id, status: view.status };
        out.delegate(id);
        out.diag("info", `still running as remote call ${id}; its result arrives as a notice`, "budget");
        return;
      }
      const outcome = view.outcome;
      const text = outcomeText(outcome);
      if (outcome.type === "output") {
        out.details = { remoteCall: id };
        // An error result: the sink records the thrown message as the text.
        if (outcome.isError) throw new Error(text);
        out.replace(text);
        return;
      }
      const http: JsonObject | undefined =
        outcome.status === undefined ? undefined : { status: outcome.status, ...(outcome.problem === undefined ? {} : { problem: outcome.problem }) };
      out.details = { error: outcome.code, remoteCall: id, ...(http === undefined ? {} : { http }) };
      throw new Error(text);
    },
  };
}
