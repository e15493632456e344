/**
 * A catalog tool that runs remotely, as a registered-tool shape: an HTTP tool (a product's endpoint) or
 * a registered MCP server's tool. Its call runs as a background `remote_call` task
 * (src/kinds/remote-call.ts), started through `ToolRuntime.startRemoteCall` with the target the captured
 * definition names (an MCP call's target carries the server's name, its own name for the tool and the
 * content hash of the tool-list snapshot the definition came from); the call waits for it within the
 * blocking budget (§8.3) and delegates after it, so the late result arrives as one notice.
 *
 * `replay: "safe"` holds because the side effect lives on the remote call: a re-invocation after a
 * restart gets the same remote call back (one per tool task) and waits for what is left of the budget,
 * counted from the call's first send (§8.3 bounds how long the turn blocks on the call, not each
 * invocation): a restart past it delegates at once instead of blocking again.
 */
import type { ToolDefinition, ToolHandler } from "./catalog-types.js";
import { outcomeText } from "./remote-call.js";
import type { RemoteTarget } from "./remote-call-state.js";
import type { AnyTool } from "./services.js";
import type { JsonObject } from "../storage/records.js";

export type HttpToolDefinition = ToolDefinition & { readonly handler: Extract<ToolHandler, { type: "http" }> };

/** A definition whose calls leave the object: an HTTP tool or an MCP server's tool. */
export type RemoteToolDefinition = ToolDefinition & {
  readonly handler: Extract<ToolHandler, { type: "http" | "mcp" }>;
};

/** Is this a definition whose calls run as remote calls? */
export function isRemoteDefinition(def: ToolDefinition): def is RemoteToolDefinition {
  return def.handler.type === "http" || def.handler.type === "mcp";
}

/** Where a call of catalog tool `name` (at catalog `version`) goes, from its captured handler. */
export function remoteTarget(name: string, version: number, handler: RemoteToolDefinition["handler"]): RemoteTarget {
  switch (handler.type) {
    case "http":
      return {
        type: "http",
        tool: name,
        version,
        url: handler.url,
        timeoutMs: handler.timeoutMs,
        idempotent: handler.idempotent,
        ...(handler.secretGeneration === undefined ? {} : { secretGeneration: handler.secretGeneration }),
      };
    case "mcp":
      return {
        type: "mcp",
        tool: name,
        version,
        server: handler.server,
        remoteTool: handler.tool,
        url: handler.url,
        timeoutMs: handler.timeoutMs,
        idempotent: handler.idempotent,
        snapshot: handler.snapshot,
      };
    default: {
      const never: never = handler;
      throw new Error(`unknown remote handler ${JSON.stringify(never)}`);
    }
  }
}

/** The tool a captured remote definition runs as (`replay: "safe"`: its side effect lives on the remote call). */
export function remoteTool(name: string, version: number, def: RemoteToolDefinition): AnyTool {
  return {
    name,
    description: def.description,
    parameters: def.parameters,
    replay: "safe",
    async execute(_toolCallId, params, out, runtime, call) {
      const target = remoteTarget(name, version, def.handler);
      const id = await runtime.startRemoteCall({ target, name, arguments: params }, call);
      const sent = (await runtime.remoteCall(id, call)).firstSentAt;
      const budgetMs = sent === undefined ? runtime.budgetMs : Math.max(0, sent + runtime.budgetMs - runtime.now());
      const done = await runtime.waitForTask(id, { budgetMs }, call);
      const view = await runtime.remoteCall(id, call);
      const mcp: JsonObject =
        target.type === "mcp"
          ? { mcp: { server: target.server, tool: target.remoteTool, snapshot: target.snapshot } }
          : {};
      if (!done || view.outcome === undefined) {
        out.write(`${name} is still running as remote call ${id}`);
        out.details = { remoteCall: id, status: view.status, ...mcp };
        out.delegate(id);
        out.diag("info", `still running as remote call ${id}; its result arrives as a notice`, "budget");
        return;
      }
      const outcome = view.outcome;
      const text = outcomeText(outcome, target);
      if (outcome.type === "output") {
        const structured = target.type === "mcp" ? structuredOf(outcome.output) : undefined;
        out.details = {
          remoteCall: id,
          ...mcp,
          ...(structured === undefined ? {} : { structuredContent: structured }),
        };
        // An error result: the sink records the thrown message as the text.
        if (outcome.isError) throw new Error(text);
        out.replace(text);
        return;
      }
      const http: JsonObject | undefined =
        outcome.status === undefined
          ? undefined
          : { status: outcome.status, ...(outcome.problem === undefined ? {} : { problem: outcome.problem }) };
      out.details = { error: outcome.code, remoteCall: id, ...mcp, ...(http === undefined ? {} : { http }) };
      throw new Error(text);
    },
  };
}

/** An MCP result's structured content, when it has one. */
function structuredOf(output: unknown): JsonObject | undefined {
  if (!isObject(output)) return undefined;
  const structured = output["structuredContent"];
  return isObject(structured) ? structured : undefined;
}

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
