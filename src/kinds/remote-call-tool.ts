/**
 * An HTTP catalog tool as a registered-tool shape: its call runs as a background `remote_call` task
 * (src/kinds/remote-call.ts), started through `ToolRuntime.startRemoteCall`; the call waits for it
 * within the blocking budget (§8.3) and delegates after it, so the late result arrives as one notice.
 */
import { PicoError } from "../core/errors.js";
import type { ToolDefinition, ToolHandler } from "./catalog-types.js";
import type { AnyTool } from "./services.js";

export type HttpToolDefinition = ToolDefinition & { readonly handler: Extract<ToolHandler, { type: "http" }> };

/** The tool a captured HTTP definition runs as (`replay: "safe"`: its side effect lives on the remote call). */
export function httpTool(name: string, version: number, def: HttpToolDefinition): AnyTool {
  return {
    name,
    description: def.description,
    parameters: def.parameters,
    replay: "safe",
    execute: () => Promise.reject(new PicoError("contract", `HTTP tool ${name} (version ${version}) cannot run yet`)),
  };
}
