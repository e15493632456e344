/**
 * Backend harnesses for the storage contract suite (suite.ts). A harness opens a fresh, empty storage
 * and, for durable backends, reopens the same data after a clean close or after a crash (the storage is
 * dropped without close). The suite calls the factory once per test, so every test gets its own data.
 *
 * This module is runtime-neutral (workerd and Node): memory and JSONL over in-memory files. JSONL over
 * the real file system is in node-backends.ts (Node only); SQLite inside a Durable Object is in
 * do-backend.ts (workerd only). Adding a backend to the suite is one harness factory plus one line in a
 * contract.test.ts.
 */
import type { Files } from "../../src/storage/files.js";
import { MemoryFiles } from "../../src/storage/files.js";
import { JsonlStorage } from "../../src/storage/jsonl.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Storage } from "../../src/storage/storage.js";

export interface BackendHarness {
  readonly name: string;
  /** A fresh, empty storage (called once per test). */
  open(): Promise<Storage>;
  /** Close the current storage and reopen the same data; absent for memory. */
  reopen?(): Promise<Storage>;
  /** Drop the current storage without closing it and reopen the same data (a process crash). */
  crash?(): Promise<Storage>;
  /** Release what the harness holds (temporary directories); called after each test. */
  dispose?(): Promise<void>;
  /**
   * Run `fn` against the current storage where it lives, in one round trip (inside the Durable Object).
   * Only for speed: the suite reads its large comparison dumps this way; everything else goes through
   * the storage `open` returned.
   */
  inside?<R>(fn: (storage: Storage) => Promise<R>): Promise<R>;
}

/** A factory the suite calls once per test; it must be cheap (open does the work). */
export type HarnessFactory = () => BackendHarness;

export const memoryBackend: HarnessFactory = () => ({
  name: "memory",
  open: async () => new MemoryStorage(),
});

/** Where a JSONL session's files live for one test: created on open, reachable again after a crash. */
export interface FilesPlace {
  /** Create the (empty) place and return files over it. */
  create(): Promise<Files>;
  /** Files over the same data, as a restarted process would get them. */
  again(previous: Files): Files;
  dispose?(): Promise<void>;
}

/** JSONL over the files of one `FilesPlace` per test; reopen and crash reopen over the same data. */
export function jsonlBackend(name: string, place: () => FilesPlace): HarnessFactory {
  return () => {
    const where = place();
    let current: { files: Files; storage: JsonlStorage } | undefined;
    const need = () => {
      if (current === undefined) throw new Error(`${name}: open() first`);
      return current;
    };
    const openOver = async (files: Files): Promise<Storage> => {
      const storage = await JsonlStorage.open(files);
      current = { files, storage };
      return storage;
    };
    return {
      name,
      open: async () => openOver(await where.create()),
      async reopen() {
        const { files, storage } = need();
        await storage.close();
        return openOver(where.again(files));
      },
      // The old object is simply abandoned, as a crashed process's would be.
      crash: async () => openOver(where.again(need().files)),
      dispose: async () => where.dispose?.(),
    };
  };
}

export const jsonlMemoryFilesBackend: HarnessFactory = jsonlBackend("jsonl (memory files)", () => ({
  create: async () => new MemoryFiles(),
  again: (previous) => previous,
}));
