/**
 * The house check that `npm run lint` runs (scripts/check-house.ts), over tiny source trees written to a
 * fresh temp directory per test and removed afterwards.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  checkHouse,
  describe as describeOffence,
  MAX_LINES,
  mayImportLine,
  WORKER_ROOMS,
  type Offence,
  type Room,
} from "../../scripts/check-house.js";

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

/** The README a room needs: what it owns, and its declared `May import:` line. */
function readme(folder: string, rooms: readonly Room[] = WORKER_ROOMS): Record<string, string> {
  const room = rooms.find((r) => r.folder === folder);
  if (room === undefined) throw new Error(`no room ${folder}`);
  return { [`src/worker/${folder}/README.md`]: `# ${folder}\n\nWhat it owns.\n\n${mayImportLine(room)}\n` };
}

const kinds = (offences: readonly Offence[]): Offence["kind"][] => offences.map((o) => o.kind);

describe("the house check", () => {
  it("passes a clean tree", async () => {
    const root = await tree({
      "src/core/a.ts": `import { b } from "./b.js";\nimport { Message } from "@earendil-works/pi-ai";\nimport type { Storage } from "../storage/storage.js";\nexport const a = b;\n`,
      "src/core/b.ts": `export const b = 1;\n`,
      "src/storage/storage.ts": `export interface Storage { readonly name: string }\n`,
      "src/worker/http/app.ts": `import { Hono } from "hono";\nimport { a } from "../core/a.js";\nexport const app = [Hono, a];\n`,
      ...readme("http"),
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
    expect(circle?.kind === "circle" ? circle.files : []).toEqual([
      "src/kinds/a.ts",
      "src/kinds/b.ts",
      "src/kinds/c.ts",
      "src/kinds/d.ts",
    ]);
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
      "src/worker/http/app.ts": `export const app = 1;\n`,
      ...readme("http"),
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

  describe("src/worker in rooms", () => {
    /** Three rooms, lowest first: store, then work (may import store), then web (may import both). */
    const rooms: readonly Room[] = [
      { folder: "store", mayImport: [] },
      { folder: "work", mayImport: ["store"] },
      { folder: "web", mayImport: ["store", "work"] },
    ];
    const house = (files: Record<string, string>): Record<string, string> => ({
      "src/worker/index.ts": `import { app } from "./web/app.js";\nexport default app;\n`,
      "src/worker/env.ts": `export interface Env { readonly A: string }\n`,
      "src/worker/store/db.ts": `import type { Env } from "../env.js";\nexport const db = (e: Env): string => e.A;\n`,
      "src/worker/work/run.ts": `import { db } from "../store/db.js";\nexport const run = db;\n`,
      "src/worker/web/app.ts": `import { run } from "../work/run.js";\nimport { db } from "../store/db.js";\nexport const app = [run, db];\n`,
      ...readme("store", rooms),
      ...readme("work", rooms),
      ...readme("web", rooms),
      ...files,
    });

    it("passes rooms that import only down their declared floors", async () => {
      expect(checkHouse(await tree(house({})), rooms)).toEqual([]);
    });

    it("The house check refuses an import that runs back up between worker folders", async () => {
      const root = await tree(
        house({
          "src/worker/store/db.ts": `import { run } from "../work/run.js";\nexport const db = (): unknown => run;\n`,
        }),
      );
      const offences = checkHouse(root, rooms);
      const imports = offences.filter((o) => o.kind === "worker-import");
      expect(imports).toEqual([
        {
          kind: "worker-import",
          file: "src/worker/store/db.ts",
          line: 1,
          specifier: "../work/run.js",
          from: "store",
          to: "work",
        },
      ]);
      expect(kinds(offences)).toEqual(["worker-import", "worker-circle"]);
      const [first] = imports;
      expect(first === undefined ? "" : describeOffence(first)).toContain("room store may not import work");
    });

    it("refuses a sideways import to a room the importer did not declare", async () => {
      const sideways: readonly Room[] = [
        { folder: "store", mayImport: [] },
        { folder: "work", mayImport: [] },
        { folder: "web", mayImport: ["store", "work"] },
      ];
      const root = await tree({ ...house({}), ...readme("work", sideways) });
      expect(
        checkHouse(root, sideways).map((o) => (o.kind === "worker-import" ? `${o.from}->${o.to}` : o.kind)),
      ).toEqual(["work->store"]);
    });

    it("names a circle between rooms", async () => {
      const root = await tree(
        house({
          "src/worker/store/db.ts": `import type { run } from "../web/app.js";\nexport const db = 1 as unknown as typeof run;\n`,
        }),
      );
      const circle = checkHouse(root, rooms).find((o) => o.kind === "worker-circle");
      expect(circle).toEqual({ kind: "worker-circle", rooms: ["store", "web", "work"] });
    });

    it("refuses a top-level file that is not the entry or a shared module, and a folder that is not a room", async () => {
      const root = await tree(
        house({ "src/worker/helpers.ts": `export const h = 1;\n`, "src/worker/misc/x.ts": `export const x = 1;\n` }),
      );
      expect(checkHouse(root, rooms)).toEqual([
        { kind: "worker-file", file: "src/worker/helpers.ts" },
        { kind: "worker-file", file: "src/worker/misc/x.ts" },
      ]);
    });

    it("refuses a shared module that imports a room, and a room that imports the entry", async () => {
      const root = await tree(
        house({
          "src/worker/env.ts": `import type { db } from "./store/db.js";\nexport interface Env { readonly A: string; readonly d?: typeof db }\n`,
          "src/worker/work/run.ts": `import { db } from "../store/db.js";\nimport type app from "../index.js";\nexport const run = db;\nexport type A = typeof app;\n`,
        }),
      );
      const found = checkHouse(root, rooms).filter((o) => o.kind === "worker-import");
      expect(found.map((o) => (o.kind === "worker-import" ? `${o.from}->${o.to}` : ""))).toEqual([
        "shared->store",
        "work->entry",
      ]);
    });

    it("refuses a room without a README, a README whose May import line is not the declaration, and a declaration naming a later room", async () => {
      const bad: readonly Room[] = [
        { folder: "store", mayImport: ["work"] },
        { folder: "work", mayImport: ["store"] },
        { folder: "web", mayImport: ["store", "work"] },
      ];
      const files = house({ "src/worker/web/README.md": "# web\n\nMay import: anything.\n" });
      delete files["src/worker/work/README.md"];
      const problems = checkHouse(await tree(files), bad).flatMap((o) =>
        o.kind === "worker-room" ? [`${o.room}: ${o.problem}`] : [],
      );
      expect(problems).toEqual([
        "store: declares work, which is not below it in WORKER_ROOMS",
        'store: README.md lacks the line "May import: the shared modules, work."',
        "work: has no README.md saying what it owns and what it may import",
        'web: README.md lacks the line "May import: the shared modules, store, work."',
      ]);
    });

    it("declares every room of today's src/worker in an order whose declarations point only down", () => {
      const seen = new Set<string>();
      for (const room of WORKER_ROOMS) {
        for (const dep of room.mayImport) expect(seen.has(dep), `${room.folder} -> ${dep}`).toBe(true);
        seen.add(room.folder);
      }
    });
  });
});
