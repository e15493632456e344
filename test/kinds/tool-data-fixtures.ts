/**
 * Test fixture: the whole tool result data (§9.3) of an untruncated output of `chars` characters with
 * every other field at its default, as `readToolData` and the API's presenters give it back.
 */
import type { ToolResultData } from "../../src/kinds/states.js";

export function untruncatedToolData(chars: number): ToolResultData {
  return {
    details: {},
    usage: null,
    addedTools: null,
    terminate: false,
    handoff: null,
    delegated: null,
    diags: [],
    truncation: { totalChars: chars, retainedChars: chars, truncated: false },
    isError: false,
  };
}
