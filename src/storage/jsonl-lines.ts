/**
 * The JSONL line format of `JsonlStorage` (§7.4): one line per committed batch,
 * `{"first":N,"writes":[...]}\n` in the main file and `{"first":N,"task":T,"writes":[...]}\n` in a task's
 * scratch file. Writes are the plain `MainWrite`/`StateWrite` records with only their known fields; the
 * payload texts `checkBatch` already produced are spliced in, so each payload is serialized once.
 * Parsing splits a file into complete lines and an unterminated (torn) tail.
 */
import type { Address, CommitBatch, Id, MainWrite, Scope } from "./records.js";
import type { CheckedBatch } from "./shared.js";
import { StorageError } from "./storage.js";

function scopeJson(scope: Scope): string {
  if ("session" in scope) return `{"session":true}`;
  if ("conversation" in scope) return `{"conversation":${scope.conversation}}`;
  return `{"scratch":${scope.scratch}}`;
}

function addrJson(addr: Address): string {
  const key = addr.key === undefined ? "" : `,"key":${JSON.stringify(addr.key)}`;
  return `{"scope":${scopeJson(addr.scope)},"namespace":${JSON.stringify(addr.namespace)}${key},"rewind":${addr.rewind}}`;
}

function writeJson(w: MainWrite, payload: string | undefined): string {
  switch (w.type) {
    case "value.set":
    case "list.append":
      return `{"type":"${w.type}","addr":${addrJson(w.addr)},"value":${payload as string}}`;
    case "value.delete":
    case "list.clear":
      return `{"type":"${w.type}","addr":${addrJson(w.addr)}}`;
    case "list.remove":
      return `{"type":"list.remove","addr":${addrJson(w.addr)},"element":${w.element}}`;
    case "createConversation": {
      const { id, parent, owner } = w.conversation;
      return JSON.stringify({
        type: w.type,
        conversation: {
          id,
          ...(parent === undefined ? {} : { parent: { conversationId: parent.conversationId, at: parent.at } }),
          ...(owner === undefined ? {} : { owner }),
        },
      });
    }
    case "deleteConversation":
      return `{"type":"deleteConversation","id":${w.id}}`;
    case "entry":
      return `{"type":"entry","entry":${payload as string}}`;
    case "task":
      return `{"type":"task","task":${payload as string}}`;
    case "patch": {
      const abort = w.abort === true ? `,"abort":true` : "";
      const owns = w.owns === undefined ? "" : `,"owns":${JSON.stringify(w.owns)}`;
      return `{"type":"patch","id":${w.id},"role":${JSON.stringify(w.role)},"state":${payload as string}${abort}${owns}}`;
    }
    case "settle":
      return `{"type":"settle","id":${w.id},"role":"terminal","state":${payload as string}}`;
    default: {
      const _: never = w;
      throw new Error(`unknown write ${String(_)}`);
    }
  }
}

/** The complete line (with its "\n") for a checked, non-empty batch. */
export function encodeLine(batch: CommitBatch, checked: CheckedBatch): string {
  const writes = batch.writes.map((w: MainWrite, i) => writeJson(w, checked.payloads[i])).join(",");
  const task = batch.kind === "scratch" ? `,"task":${batch.task}` : "";
  return `{"first":${checked.first}${task},"writes":[${writes}]}\n`;
}

/** One complete line of a file, parsed into the batch it logged. */
export interface LoggedBatch {
  readonly file: string;
  /** 1-based line number, for error messages. */
  readonly line: number;
  readonly first: Id;
  readonly last: Id;
  readonly batch: CommitBatch;
}

export interface ParsedFile {
  readonly batches: LoggedBatch[];
  /** Character length of the complete lines; anything after it is a torn tail. */
  readonly complete: number;
  readonly torn: boolean;
}

export function corrupt(file: string, line: number, message: string): StorageError {
  return new StorageError("corrupt", `${file} line ${line}: ${message}`);
}

/**
 * Parse a log file. `task` is the scratch file's task id, undefined for the main file. Only an
 * unterminated final line is tolerated (reported as `torn`); any malformed complete line throws
 * StorageError("corrupt"), as does a batch that does not start after the previous one in the file.
 */
export function parseFile(file: string, text: string, task: Id | undefined): ParsedFile {
  const batches: LoggedBatch[] = [];
  const end = text.lastIndexOf("\n") + 1;
  let start = 0;
  let line = 0;
  let previous = 0;
  while (start < end) {
    line++;
    const stop = text.indexOf("\n", start);
    const raw = text.slice(start, stop);
    start = stop + 1;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw corrupt(file, line, "not JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
      throw corrupt(file, line, "not a batch object");
    const record = parsed as { first?: unknown; task?: unknown; writes?: unknown };
    if (typeof record.first !== "number" || !Number.isSafeInteger(record.first) || record.first < 1) {
      throw corrupt(file, line, "first must be a positive integer");
    }
    if (!Array.isArray(record.writes) || record.writes.length === 0)
      throw corrupt(file, line, "writes must be a non-empty array");
    if (record.task !== task)
      throw corrupt(file, line, task === undefined ? "a main batch names no task" : `task must be ${task}`);
    const first = record.first;
    const last = first + record.writes.length - 1;
    if (first <= previous)
      throw corrupt(file, line, `batch ${first}-${last} does not follow the previous batch (through ${previous})`);
    previous = last;
    const batch: CommitBatch =
      task === undefined
        ? { kind: "main", writes: record.writes as MainWrite[] }
        : {
            kind: "scratch",
            task,
            writes: record.writes as CommitBatch["writes"] as Extract<CommitBatch, { kind: "scratch" }>["writes"],
          };
    batches.push({ file, line, first, last, batch });
  }
  return { batches, complete: end, torn: end < text.length };
}
