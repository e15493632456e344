/**
 * The §10.2 JSONL rows on a real file system: `NodeFiles` in a fresh temp directory per test (fsync on),
 * removed afterwards. Row bodies live in test/contract/jsonl-rows.ts.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe } from "vitest";
import { NodeFiles } from "../../src/storage/node-files.js";
import { jsonlRows } from "../contract/jsonl-rows.js";

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe("JsonlStorage over NodeFiles", () => {
  jsonlRows(" (jsonl, node fs)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pico-jsonl-"));
    dirs.push(dir);
    return {
      files: new NodeFiles(dir, { fsync: true }),
      setRaw: async (name, text) => {
        const path = join(dir, ...name.split("/"));
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, text, "utf8");
      },
    };
  });
});
