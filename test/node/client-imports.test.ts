/**
 * The typed client imports nothing from src/worker/ (README "Architecture"): its wire types come from src/api/. The
 * check walks every relative import of src/client/, transitively, so a server file reached through
 * another module counts too.
 */
import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const match of text.matchAll(/(?:import|export)[^'"]*?from\s*["'](\.[^"']+)["']/g)) {
    const target = resolve(dirname(file), (match[1] ?? "").replace(/\.js$/, ".ts"));
    out.push(target);
  }
  return out;
}

describe("typed client", () => {
  it("imports nothing from src/worker, directly or through another module", () => {
    const seen = new Set<string>();
    const queue = ["client.ts", "index.ts", "sse.ts"].map((name) => join(root, "src/client", name));
    while (queue.length > 0) {
      const file = queue.pop() ?? "";
      if (seen.has(file)) continue;
      seen.add(file);
      queue.push(...imports(file));
    }
    const reached = [...seen].map((file) => relative(root, file));
    expect(reached).toContain("src/api/responses.ts");
    expect(reached.filter((file) => file.startsWith("src/worker/"))).toEqual([]);
  });
});
