/**
 * Code in the docs that is not a shell walk is still compiled: docs/frontends.md's React page is kept, byte for
 * byte, as test/browser/docs-chat-page.tsx, which the type-check compiles against the real React and AI SDK
 * types (`npm run typecheck`, test/browser/tsconfig.json). Editing one without the other fails here.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

/** The first fenced block of `language` in the Markdown file. */
function firstBlock(markdown: string, language: string): string | undefined {
  const fence = "```";
  const start = markdown.indexOf(`${fence}${language}\n`);
  if (start < 0) return undefined;
  const from = start + fence.length + language.length + 1;
  const end = markdown.indexOf(`${fence}\n`, from);
  return end < 0 ? undefined : markdown.slice(from, end);
}

describe("code in the docs", () => {
  it("docs/frontends.md's React page is the file the type-check compiles", () => {
    const docs = readFileSync(join(root, "docs", "frontends.md"), "utf8");
    const page = readFileSync(join(root, "test", "browser", "docs-chat-page.tsx"), "utf8");
    const block = firstBlock(docs, "tsx");
    expect(block).toBeDefined();
    expect(block).toBe(page);
  });
});
