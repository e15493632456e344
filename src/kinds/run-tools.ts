/**
 * Tools a page offers for one turn (docs/frontends.md "AG-UI"): an AG-UI run's `tools` are client tools of the
 * turn its input starts, not of the session. The generation created for that input captures them
 * (`CapturedConfig.runTools`), every generation of the same group (after tool results, a retry, a collapse) keeps
 * them, and the next group does not. A call of one parks as a client tool does (a `client_tool` pending item)
 * with the definition the generation captured, so a recovery or a replay never needs the page again.
 *
 * An input that offers page tools while its conversation is busy is queued as a followUp with its tools beside it
 * (conversation value `pi.inbox.run_tools`, keyed by the input id): its turn is its own, never the live one. A
 * boundary that lands queued items makes such an input a group of its own (placement.ts): items queued before it form
 * a group first, items after it wait for its answer; the generation of its group captures its tools.
 */
import { bindTo, conversationValue, withKey, type ValueSpec } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
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

const queuedBase = conversationValue<OfferedTool[]>("pi.inbox.run_tools", { rewind: false });
function queuedTools(inputId: Id): ValueSpec<OfferedTool[]> {
  return withKey(queuedBase, String(inputId));
}

/** Keep the page tools of queued input `inputId` until a boundary places it (in the commit that queues it). */
export function queueRunTools(b: TxBuilder, conversationId: Id, inputId: Id, tools: readonly OfferedTool[]): void {
  b.value(bindTo(queuedTools(inputId), conversationId)).set([...tools]);
}

/** The page tools queued input `inputId` offers (undefined: none). */
export async function queuedRunTools(
  b: TxBuilder,
  conversationId: Id,
  inputId: Id,
): Promise<OfferedTool[] | undefined> {
  return b.value(bindTo(queuedTools(inputId), conversationId)).get();
}

/** The page tools of a group being placed (its input that offered some), forgotten as the group takes them. */
export async function takeRunTools(
  b: TxBuilder,
  conversationId: Id,
  group: readonly Id[],
): Promise<OfferedTool[] | undefined> {
  let found: OfferedTool[] | undefined;
  for (const inputId of group) {
    const tools = await queuedRunTools(b, conversationId, inputId);
    if (tools === undefined) continue;
    b.value(bindTo(queuedTools(inputId), conversationId)).delete();
    found ??= tools;
  }
  return found;
}
