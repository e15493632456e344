/**
 * Node-only backend harnesses for the storage contract suite: JSONL over the real file system, one
 * temporary directory per test, removed afterwards. Imported only by test/node/contract.test.ts, so the
 * workerd side never sees node:fs.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NodeFiles } from "../../src/storage/node-files.js";
import { jsonlBackend, type HarnessFactory } from "./backends.js";

export const jsonlNodeFilesBackend: HarnessFactory = jsonlBackend("jsonl (node fs)", () => {
  let dir: string | undefined;
  return {
    async create() {
      dir = await mkdtemp(join(tmpdir(), "pico-contract-"));
      return new NodeFiles(dir);
    },
    // A fresh NodeFiles over the same directory: what a restarted process opens.
    again: () => new NodeFiles(dir as string),
    async dispose() {
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
  };
});
