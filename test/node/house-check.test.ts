/**
 * The house check that `npm run lint` runs (scripts/check-house.ts), over tiny source trees written to a
 * fresh temp directory per test and removed afterwards.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkHouse, describe as describeOffence, MAX_LINES, type Offence } from "../../scripts/check-house.js";

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A tree of files (repository-relative path -> text) in a new temp directory; returns its root. */
async function tree(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "pico-house-"));
  dirs.push(root);
  for (const [path, text] of Object.entries(files)) {
    const full = join(root, ...path.split("/"));
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, text, "utf8");
  }
  return root;
}

const kinds = (offences: readonly Offence[]): Offence["kind"][] => offences.map((o) => o.kind);

describe("the house check", () => {
  it("passes a clean tree", async () => {
    const root = await tree({
      "src/core/a.ts": `import { b } from "./b.js";\nimport { Message } from "@earendil-works/pi-ai";\nimport type { Storage } from "../storage/storage.js";\nexport const a = b;\n`,
      "src/core/b.ts": `export const b = 1;\n`,
      "src/storage/storage.ts": `export interface Storage { readonly name: string }\n`,
      "src/worker/app.ts": `import { Hono } from "hono";\nimport { a } from "../core/a.js";\nexport const app = [Hono, a];\n`,
    });
    expect(checkHouse(root)).toEqual([]);
  });

  it("fails on an import circle of four files, type imports included", async () => {
    const root = await tree({
      "src/kinds/a.ts": `import { b } from "./b.js";\nexport const a = b;\n`,
      "src/kinds/b.ts": `import type { C } from "./c.js";\nexport const b: C = 1;\n`,
      "src/kinds/c.ts": `export type { D as C } from "./d.js";\n`,
      "src/kinds/d.ts": `export type D = typeof import("./a.js").a;\n`,
    });
    const offences = checkHouse(root);
    expect(kinds(offences)).toEqual(["circle"]);
    const [circle] = offences;
    expect(circle?.kind === "circle" ? circle.files : []).toEqual(["src/kinds/a.ts", "src/kinds/b.ts", "src/kinds/c.ts", "src/kinds/d.ts"]);
    expect(circle === undefined ? "" : describeOffence(circle)).toContain("import circle of 4 files");
  });

  it("passes an import circle of three files", async () => {
    const root = await tree({
      "src/kinds/a.ts": `import { b } from "./b.js";\nexport const a = b;\n`,
      "src/kinds/b.ts": `import type { C } from "./c.js";\nexport const b: C = 1;\n`,
      "src/kinds/c.ts": `import type { a } from "./a.js";\nexport type C = typeof a;\n`,
    });
    expect(checkHouse(root)).toEqual([]);
  });

  it("follows imports of a directory's index file and of a .ts extension into a circle", async () => {
    const root = await tree({
      "src/rig/a.ts": `import { b } from "./parts";\nexport const a = b;\n`,
      "src/rig/parts/index.ts": `export { b } from "./b.ts";\n`,
      "src/rig/parts/b.ts": `import { c } from "../c";\nexport const b = c;\n`,
      "src/rig/c.ts": `export const c = import("./a.js");\n`,
    });
    expect(kinds(checkHouse(root))).toEqual(["circle"]);
  });

  it(`fails on a file of ${MAX_LINES + 1} lines and passes one of ${MAX_LINES}`, async () => {
    const lines = (n: number): string => "export {};\n".repeat(n);
    const root = await tree({ "src/tools/long.ts": lines(MAX_LINES + 1), "src/tools/fits.ts": lines(MAX_LINES) });
    expect(checkHouse(root)).toEqual([{ kind: "long-file", file: "src/tools/long.ts", lines: MAX_LINES + 1 }]);
  });

  it("fails on a core file that imports hono, zod, cloudflare, a storage backend or a file above core", async () => {
    const root = await tree({
      "src/core/a.ts": [
        `import { Hono } from "hono";`,
        `import { z } from "zod";`,
        `import type { Context } from "hono/context";`,
        `import { DurableObject } from "cloudflare:workers";`,
        `import type { Ai } from "@cloudflare/workers-types";`,
        `import { MemoryStorage } from "../storage/memory.js";`,
        `import { app } from "../worker/app.js";`,
        `export const a = [Hono, z, DurableObject, MemoryStorage, app];`,
        ``,
      ].join("\n"),
      "src/storage/memory.ts": `export class MemoryStorage {}\n`,
      "src/worker/app.ts": `export const app = 1;\n`,
    });
    const offences = checkHouse(root);
    expect(offences.map((o) => (o.kind === "core-import" ? `${o.line} ${o.specifier}` : o.kind))).toEqual([
      "1 hono",
      "2 zod",
      "3 hono/context",
      "4 cloudflare:workers",
      "5 @cloudflare/workers-types",
      "6 ../storage/memory.js",
      "7 ../worker/app.js",
    ]);
    const [first] = offences;
    expect(first === undefined ? "" : describeOffence(first)).toContain(`src/core/a.ts:1 imports "hono"`);
  });
});
