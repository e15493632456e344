/**
 * The small append-only files interface `JsonlStorage` writes through (§7.4), and `MemoryFiles`, an
 * in-memory implementation with fault injection for tests. `NodeFiles` (node-files.ts, Node only) is
 * the on-disk implementation.
 *
 * Files hold UTF-8 text. Names are relative and may contain "/" (JSONL uses "session.scratch/<task id>");
 * an implementation maps them to its own layout. Lengths are JS string lengths (UTF-16 code units) of
 * the text as `read` returns it, so a caller can cut at a position it found in that text.
 */

export interface Files {
  /** Every file name, in no particular order. */
  list(): Promise<string[]>;
  /** The whole file as text, or undefined when it does not exist. */
  read(name: string): Promise<string | undefined>;
  /** Append `text`, creating the file when missing. Durable when it resolves (per the implementation's
   * sync policy); on rejection any prefix of `text` may have reached the file. */
  append(name: string, text: string): Promise<void>;
  /** Keep the first `length` characters (UTF-16 code units of the text `read` returns), drop the rest. */
  truncate(name: string, length: number): Promise<void>;
  /** Remove the file; a missing file is not an error. */
  unlink(name: string): Promise<void>;
}

/** Files in a Map, with switches that make operations fail the way a disk or process can. */
export class MemoryFiles implements Files {
  readonly #files = new Map<string, string>();
  /** unlink rejects (the file stays) while set. */
  failUnlink = false;
  /** The next append writes only this many characters of its text, then rejects (a torn write). */
  failNextAppendAfter: number | undefined = undefined;
  /** Every append and truncate, in order, as `append name` / `truncate name length`, for assertions. */
  readonly log: string[] = [];

  async list(): Promise<string[]> {
    return [...this.#files.keys()];
  }

  async read(name: string): Promise<string | undefined> {
    return this.#files.get(name);
  }

  async append(name: string, text: string): Promise<void> {
    this.log.push(`append ${name}`);
    const keep = this.failNextAppendAfter;
    if (keep !== undefined) {
      this.failNextAppendAfter = undefined;
      this.#files.set(name, (this.#files.get(name) ?? "") + text.slice(0, keep));
      throw new Error(`injected append failure on ${name} after ${keep} characters`);
    }
    this.#files.set(name, (this.#files.get(name) ?? "") + text);
  }

  async truncate(name: string, length: number): Promise<void> {
    this.log.push(`truncate ${name} ${length}`);
    const text = this.#files.get(name);
    if (text === undefined) throw new Error(`truncate: no file ${name}`);
    this.#files.set(name, text.slice(0, length));
  }

  async unlink(name: string): Promise<void> {
    if (this.failUnlink) throw new Error(`injected unlink failure on ${name}`);
    this.#files.delete(name);
  }

  /** Replace a file's contents with raw text (torn or malformed lines for recovery tests). */
  setRaw(name: string, text: string): void {
    this.#files.set(name, text);
  }
}
