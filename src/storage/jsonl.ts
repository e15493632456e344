/**
 * The JSONL backend (§7.4): the memory backend plus one line per batch, over the `Files` interface.
 * Main batches append to the main file ("session.jsonl"); a task's scratch batches append to its own
 * file "<main without .jsonl>.scratch/<task id>" ("session.scratch/12"), so every commit writes exactly
 * one file. A commit writes all bytes, then publishes in memory; settlement's main line is authoritative
 * and the task's scratch file is unlinked afterwards (a failed unlink is reported and otherwise ignored:
 * retired scratch is invisible, at once and after reopen).
 *
 * `open` recovers across files in the order of §7.4: main batches first (task liveness, retirement),
 * then scratch files of surviving live tasks only; all retained batches are merged by sequence, checked
 * for overlap and replayed through `checkBatch` + `MemoryState.apply`. Only an unterminated final line is
 * discarded (and cut off before anything is appended); any malformed complete line fails the open.
 *
 * Storage version (§6.5): "<main without .jsonl>.version" holds `{"storageVersion":N}`; open writes it
 * when missing and refuses, touching nothing, a version newer than `JSONL_STORAGE_VERSION`.
 */
import type { CommitBatch, Id, TaskRole } from "./records.js";
import type { Files } from "./files.js";
import { corrupt, encodeLine, parseFile, type LoggedBatch } from "./jsonl-lines.js";
import { MemoryStorage } from "./memory.js";
import { checkBatch } from "./shared.js";
import { StorageError } from "./storage.js";

/** The JSONL storage format version this code reads and writes (§6.5). */
export const JSONL_STORAGE_VERSION = 1;

export interface JsonlReport {
  readonly type: "unlink_failed" | "torn_line_discarded";
  readonly file: string;
  readonly detail: string;
}

export interface JsonlOptions {
  /** The main log's name; default "session.jsonl". Scratch files live under "<name without .jsonl>.scratch/". */
  readonly mainFile?: string;
  /** Told about recoverable trouble: a scratch unlink that failed, a torn final line that was discarded. */
  readonly onReport?: (report: JsonlReport) => void;
}

export class JsonlStorage extends MemoryStorage {
  readonly #files: Files;
  readonly #main: string;
  readonly #scratchDir: string;
  readonly #report: (report: JsonlReport) => void;
  /** Live tasks whose scratch file may exist. */
  readonly #scratchFiles = new Set<Id>();
  /** Commits run one at a time, in call order, so numbering and file appends cannot interleave. */
  #queue: Promise<unknown> = Promise.resolve();
  #closing = false;

  private constructor(files: Files, options: JsonlOptions) {
    super({ storageVersion: JSONL_STORAGE_VERSION });
    this.#files = files;
    this.#main = options.mainFile ?? "session.jsonl";
    this.#scratchDir = `${this.#main.replace(/\.jsonl$/, "")}.scratch/`;
    this.#report = options.onReport ?? (() => undefined);
  }

  /** Open (or create) the session stored in `files`, recovering per §7.4. */
  static async open(files: Files, options: JsonlOptions = {}): Promise<JsonlStorage> {
    const storage = new JsonlStorage(files, options);
    await storage.#checkVersion();
    await storage.#recover();
    return storage;
  }

  /** Refuse storage written by newer code before reading anything else; record the version when missing. */
  async #checkVersion(): Promise<void> {
    const name = `${this.#main.replace(/\.jsonl$/, "")}.version`;
    const text = await this.#files.read(name);
    if (text !== undefined && text.endsWith("\n")) {
      let stored: unknown;
      try {
        stored = (JSON.parse(text) as { storageVersion?: unknown } | null)?.storageVersion;
      } catch {
        stored = undefined;
      }
      if (typeof stored !== "number" || !Number.isSafeInteger(stored) || stored < 1)
        throw new StorageError("corrupt", `${name}: not a storage version record`);
      if (stored > JSONL_STORAGE_VERSION) {
        throw new StorageError(
          "version",
          `session storage has version ${stored}, newer than this code's version ${JSONL_STORAGE_VERSION}; deploy the newer code to open it`,
        );
      }
      return;
    }
    // Missing, or torn by a crash while it was first written: (re)write it whole.
    if (text !== undefined) await this.#files.truncate(name, 0);
    await this.#files.append(name, `${JSON.stringify({ storageVersion: JSONL_STORAGE_VERSION })}\n`);
  }

  #scratchName(task: Id): string {
    return `${this.#scratchDir}${task}`;
  }

  override commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    if (this.#closing) return Promise.reject(new StorageError("closed", "storage is closed"));
    const run = this.#queue.then(() => this.#commit(batch));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    this.assertOpen();
    const checked = checkBatch(batch, this.memory.view);
    if (batch.writes.length === 0) return { first: checked.first, last: checked.last };
    const file = batch.kind === "main" ? this.#main : this.#scratchName(batch.task);
    // Noted before the append: even a failed first append may leave a file that settlement must remove.
    if (batch.kind === "scratch") this.#scratchFiles.add(batch.task);
    const line = encodeLine(batch, checked);
    try {
      await this.#files.append(file, line);
      this.publish(batch, checked);
    } catch (error) {
      // Any prefix of the line, or all of it, may have landed (e.g. only the sync failed): the outcome is
      // uncertain. Publishing nothing and carrying on would let the next commit (perhaps in another file)
      // reuse these sequence numbers, so this object stops; reopen recovers what is complete (§3.3, §7.4).
      throw this.markFaulted(error);
    }
    if (batch.kind === "main") {
      for (const w of batch.writes) if (w.type === "settle") await this.#retire(w.id);
    }
    return { first: checked.first, last: checked.last };
  }

  /** After the settlement line is durable: the scratch file is dead weight, remove it best effort. */
  async #retire(task: Id): Promise<void> {
    if (!this.#scratchFiles.delete(task)) return;
    const name = this.#scratchName(task);
    await this.#unlink(name);
  }

  async #unlink(name: string): Promise<void> {
    try {
      await this.#files.unlink(name);
    } catch (error) {
      this.#report({
        type: "unlink_failed",
        file: name,
        detail: error instanceof Error ? error.message : String(error),
      });
    }
  }

  override async close(): Promise<void> {
    this.#closing = true;
    await this.#queue;
    this.markClosed();
  }

  async #recover(): Promise<void> {
    // 1. Main batches: every complete line, and the task roles they leave behind.
    const mainText = (await this.#files.read(this.#main)) ?? "";
    const main = parseFile(this.#main, mainText, undefined);
    const roles = new Map<Id, TaskRole>();
    for (const { batch } of main.batches) {
      for (const w of batch.writes) {
        if (w === null || typeof w !== "object") continue; // checkBatch rejects it during replay
        if (w.type === "task" && typeof w.task?.id === "number") roles.set(w.task.id, w.task.role);
        else if ((w.type === "patch" || w.type === "settle") && roles.has(w.id)) roles.set(w.id, w.role);
      }
    }

    // 2. Scratch files of surviving live tasks; retired ones are never read.
    const retained: LoggedBatch[] = [...main.batches];
    const torn: { file: string; complete: number; length: number }[] = [];
    if (main.torn) torn.push({ file: this.#main, complete: main.complete, length: mainText.length });
    const retired: string[] = [];
    for (const name of await this.#files.list()) {
      if (!name.startsWith(this.#scratchDir)) continue;
      const suffix = name.slice(this.#scratchDir.length);
      if (!/^[1-9][0-9]*$/.test(suffix)) continue; // not a scratch file of ours
      const task = Number(suffix);
      const role = roles.get(task);
      if (role === undefined) {
        throw new StorageError("corrupt", `${name}: scratch file of task ${task}, which the main log never created`);
      }
      if (role === "terminal") {
        retired.push(name);
        continue;
      }
      const text = (await this.#files.read(name)) ?? "";
      const parsed = parseFile(name, text, task);
      retained.push(...parsed.batches);
      if (parsed.torn) torn.push({ file: name, complete: parsed.complete, length: text.length });
      this.#scratchFiles.add(task);
    }

    // 3-4. Merge by sequence: ranges increase without overlap (gaps are normal), references hold, and
    // lastSeq ends at the highest retained endpoint.
    retained.sort((a, b) => a.first - b.first);
    let previous: LoggedBatch | undefined;
    for (const logged of retained) {
      if (previous !== undefined && logged.first <= previous.last) {
        throw corrupt(
          logged.file,
          logged.line,
          `batch ${logged.first}-${logged.last} overlaps ${previous.file} line ${previous.line} (${previous.first}-${previous.last})`,
        );
      }
      let checked;
      try {
        checked = checkBatch(logged.batch, this.memory.viewAt(logged.first - 1));
      } catch (error) {
        if (error instanceof StorageError) throw corrupt(logged.file, logged.line, error.message);
        throw error;
      }
      this.memory.apply(logged.batch, checked);
      previous = logged;
    }

    // 5. Only now that every retained line is valid: cut torn tails, then drop retired scratch.
    for (const t of torn) {
      await this.#files.truncate(t.file, t.complete);
      this.#report({
        type: "torn_line_discarded",
        file: t.file,
        detail: `discarded ${t.length - t.complete} characters after the last complete line`,
      });
    }
    for (const name of retired) await this.#unlink(name);
  }
}
