/**
 * `Files` over a directory with node:fs/promises, for JSONL sessions on a real disk (Node only: never
 * import this from worker code; it is type-checked by test/node/tsconfig.json). A name's "/" separators
 * become subdirectories, so "session.scratch/12" is <dir>/session.scratch/12.
 *
 * With `fsync: true` every append and truncate is flushed before it resolves, and the directory is
 * flushed when a file is first created, so a resolved append survives a machine crash; without it, a
 * resolved append survives a process crash only.
 */
import { mkdir, open, readdir, readFile, rm } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import type { Files } from "./files.js";

function isMissing(error: unknown): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === "ENOENT";
}

export class NodeFiles implements Files {
  readonly #dir: string;
  readonly #fsync: boolean;
  /** Files this object has already created or seen, so directory syncs happen once per file. */
  readonly #known = new Set<string>();

  constructor(dir: string, options: { fsync?: boolean } = {}) {
    this.#dir = dir;
    this.#fsync = options.fsync ?? false;
  }

  #path(name: string): string {
    const parts = name.split("/");
    if (name === "" || parts.some((p) => p === "" || p === "." || p === ".."))
      throw new Error(`bad file name ${JSON.stringify(name)}`);
    return join(this.#dir, ...parts);
  }

  async list(): Promise<string[]> {
    let found;
    try {
      found = await readdir(this.#dir, { recursive: true, withFileTypes: true });
    } catch (error) {
      if (isMissing(error)) return [];
      throw error;
    }
    return found
      .filter((d) => d.isFile())
      .map((d) => relative(this.#dir, join(d.parentPath, d.name)).split(sep).join("/"));
  }

  async read(name: string): Promise<string | undefined> {
    try {
      return await readFile(this.#path(name), "utf8");
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async append(name: string, text: string): Promise<void> {
    const path = this.#path(name);
    const fresh = !this.#known.has(name);
    if (fresh) await mkdir(dirname(path), { recursive: true });
    const handle = await open(path, "a");
    try {
      await handle.writeFile(text, "utf8");
      if (this.#fsync) await handle.datasync();
    } finally {
      await handle.close();
    }
    if (fresh) {
      // A new file's directory entry must be durable too, or a machine crash can lose the whole file.
      if (this.#fsync) await this.#syncDir(dirname(path));
      this.#known.add(name);
    }
  }

  /** `length` counts UTF-16 code units of the decoded text; the cut happens at the matching byte offset. */
  async truncate(name: string, length: number): Promise<void> {
    const path = this.#path(name);
    const handle = await open(path, "r+");
    try {
      const bytes = await handle.readFile();
      const prefix = bytes.toString("utf8").slice(0, length);
      const keep = Buffer.from(prefix, "utf8");
      // Invalid UTF-8 before the cut decodes to U+FFFD and would shift the byte offset: refuse rather
      // than cut in the wrong place.
      if (!bytes.subarray(0, keep.length).equals(keep)) {
        throw new Error(`cannot truncate ${name}: the retained prefix is not valid UTF-8`);
      }
      await handle.truncate(keep.length);
      if (this.#fsync) await handle.datasync();
    } finally {
      await handle.close();
    }
  }

  async unlink(name: string): Promise<void> {
    await rm(this.#path(name), { force: true });
    this.#known.delete(name);
  }

  async #syncDir(dir: string): Promise<void> {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
}
