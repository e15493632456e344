/**
 * What the model reads of an MCP tool's result (src/kinds/mcp-result.ts; docs/mcp.md "Results and
 * errors"): text parts in order, other parts as a line naming them, structured content when there is no
 * content.
 */
import { describe, expect, it } from "vitest";
import { mcpResultText } from "../../src/kinds/mcp-result.js";
import type { JsonObject } from "../../src/storage/records.js";

describe("mcpResultText", () => {
  it("reads text parts in order and names the others", () => {
    const output: JsonObject = {
      content: [
        { type: "text", text: "first" },
        { type: "image", data: "aGk=", mimeType: "image/png" },
        { type: "audio", data: "aGk=", mimeType: "audio/wav" },
        { type: "resource_link", uri: "file:///a.txt", name: "a" },
        { type: "resource", resource: { uri: "file:///b.txt", text: "embedded b" } },
        { type: "resource", resource: { uri: "file:///c.bin", blob: "aGk=" } },
        { type: "text", text: "last" },
      ],
    };
    expect(mcpResultText(output)).toBe(
      [
        "first",
        "[image image/png]",
        "[audio audio/wav]",
        "[resource file:///a.txt (a)]",
        "embedded b",
        "[resource file:///c.bin]",
        "last",
      ].join("\n"),
    );
  });

  it("reads structured content when there is no content, and anything else as JSON", () => {
    expect(mcpResultText({ content: [], structuredContent: { total: 3 } })).toBe('{"total":3}');
    expect(mcpResultText({ content: [{ type: "text", text: "3" }], structuredContent: { total: 3 } })).toBe("3");
    expect(mcpResultText("plain")).toBe("plain");
    expect(mcpResultText({ other: 1 })).toBe('{"other":1}');
    expect(mcpResultText([1, 2])).toBe("[1,2]");
  });
});
