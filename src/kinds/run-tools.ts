/**
 * Tools a page offers for one turn (docs/frontends.md "AG-UI"): an AG-UI run's `tools` are client tools of the
 * turn its input starts, not of the session. The generation created for that input captures them
 * (`CapturedConfig.runTools`), every generation of the same group (after tool results, a retry, a collapse) keeps
 * them, and the next group does not. A call of one parks as a client tool does (a `client_tool` pending item)
 * with the definition the generation captured, so a recovery or a replay never needs the page again.
 */
import { DEFAULT_CLIENT_TIMEOUT_MS } from "./tool-catalog-call.js";
import type { CapturedTool, OfferedTool } from "./catalog-types.js";
import type { CapturedConfig } from "./states.js";

/** The captured definition of a page tool's call: a client tool without approval, version 0 (no catalog). */
export function runToolCapture(tool: OfferedTool): CapturedTool {
  return {
    name: tool.name,
    version: 0,
    definition: {
      description: tool.description,
      parameters: tool.parameters,
      handler: { type: "client", timeoutMs: DEFAULT_CLIENT_TIMEOUT_MS },
      approval: "never",
      onTimeout: "deny",
    },
  };
}

/** The page tool a call names, when the generation's captured config offers one of that name. */
export function runToolOf(config: CapturedConfig | undefined, name: string): OfferedTool | undefined {
  return config?.runTools?.find((tool) => tool.name === name);
}

/** The config with the page tools of a group (absent when there are none). */
export function withRunTools(config: CapturedConfig, runTools: readonly OfferedTool[] | undefined): CapturedConfig {
  const { runTools: _previous, ...rest } = config;
  return runTools === undefined || runTools.length === 0 ? rest : { ...rest, runTools: [...runTools] };
}
