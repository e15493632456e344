/**
 * Backends the core tests run on. Memory runs in the test isolate; SQLite runs inside a Durable Object
 * (the whole test body executes in the object's context through runInDurableObject), one object per
 * test so no state leaks between tests.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { MemoryFiles } from "../../src/storage/files.js";
import { JsonlStorage } from "../../src/storage/jsonl.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import type { Storage } from "../../src/storage/storage.js";

export interface CoreBackend {
  readonly name: string;
  run<T>(body: (storage: Storage) => Promise<T>): Promise<T>;
}

let counter = 0;

export const coreBackends: readonly CoreBackend[] = [
  { name: "memory", run: (body) => body(new MemoryStorage()) },
  {
    name: "sqlite",
    run: (body) => {
      counter += 1;
      const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`core-${Date.now()}-${counter}`));
      return runInDurableObject(stub, async (_instance, state) => body(await SqliteStorage.open(state.storage)));
    },
  },
];

/**
 * Every backend a core rule must hold on: the core backends plus JSONL over in-memory files.
 * The JSONL backend runs in the test isolate; its files are fresh per run.
 */
export const everyBackend: readonly CoreBackend[] = [
  ...coreBackends,
  { name: "jsonl", run: async (body) => body(await JsonlStorage.open(new MemoryFiles())) },
];
