/**
 * A session's export and import (docs/operations.md "Export and import"), used by the SessionObject
 * (object.ts) for GET and POST /v1/sessions/{session}/export|import.
 *
 * The export is JSONL: one header line (`exportHeader`, src/api/transfer.ts) with the product data pico
 * storage does not hold, then the §7.3 batches storage/sqlite-export.ts rebuilds from SQLite in sequence
 * order, pulled one line at a time into a ReadableStream (never the whole session in memory). A user's
 * export is marked `redacted`: no remote URL and no remote server's text (session/user-export.ts).
 *
 * The import stages into a fresh object: each line is parsed, checked against the wire schema and
 * committed through `SqliteStorage` (which checks ids, references and structure, §7.3), so the ids of
 * the export are kept; the first bad line stops it, and the caller wipes the object. The creating
 * commit's incarnation is replaced by a new one (keys that leave the object never repeat the old
 * session's). Then one settling commit brings live work back settled: every live task but a schedule is
 * marked for abort (the patch `Driver.mark` writes; its kind's abort handler settles it once the session
 * opens) with the abort reason `imported` on the task (session/abort-reasons.ts), every schedule gets its
 * pause flag, and an `edge.session.imported` value records both. Nothing
 * of the outbox, usage reports or limits is carried, so nothing external is sent again.
 */
import { bind } from "../../core/state.js";
import { sessionValue } from "../../core/state.js";
import { schedulePaused } from "../../kinds/schedule.js";
import type { Address, CommitBatch, Id, JsonObject, MainWrite, Task } from "../../storage/records.js";
import type { SqlHost } from "../../storage/sql.js";
import { exportLines } from "../../storage/sqlite-export.js";
import { StorageError } from "../../storage/storage.js";
import {
  EXPORT_FORMAT,
  EXPORT_VERSION,
  exportBatchLine,
  exportHeader,
  MAX_IMPORT_BYTES,
  type ExportHeader,
} from "../../api/transfer.js";
import { Problem } from "../problems.js";
import { incarnationValue, mintIncarnation } from "./config.js";
import { readOwner, recordOwner } from "../identity/owner.js";
import { TEMPLATE_KEY, type TemplateBinding } from "../directory/templates.js";
import type { DirectoryMeta } from "./directory-link.js";
import type { ImportResponse } from "../../api/transfer.js";
import { SqliteStorage } from "../../storage/sqlite.js";
import { abortReasonValue } from "./abort-reasons.js";
import { UserExportRedactor } from "./user-export.js";

export { EXPORT_FORMAT, EXPORT_VERSION };

/** What an import settled, recorded in the session (session value `edge.session.imported`). */
export interface ImportSettlement {
  readonly reason: "imported";
  readonly aborted: readonly Id[];
  readonly paused: readonly Id[];
}

export const importedValue = sessionValue<ImportSettlement>("edge.session.imported");

/** The export as a byte stream: the header line, then the batch lines, pulled one at a time. */
export function exportStream(host: SqlHost, header: ExportHeader): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let lines: Generator<string, void, undefined> | undefined;
  const user = header.redacted ? new UserExportRedactor() : undefined;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (lines === undefined) {
        lines = exportLines(host, header.lastSeq);
        controller.enqueue(encoder.encode(`${JSON.stringify(header)}\n`));
        return;
      }
      const next = lines.next();
      if (next.done === true) controller.close();
      else controller.enqueue(encoder.encode(user === undefined ? next.value : user.line(next.value)));
    },
    cancel() {
      lines?.return();
    },
  });
}

function refused(line: number, detail: string): Problem {
  return new Problem("invalid_import", `line ${line}: ${detail}`, undefined, { line });
}

/** The lines of `body` (without their "\n"), numbered from 1; more than MAX_IMPORT_BYTES is refused. */
async function* bodyLines(body: ReadableStream<Uint8Array>): AsyncGenerator<{ line: number; text: string }> {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  let bytes = 0;
  let pending = "";
  let line = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > MAX_IMPORT_BYTES)
        throw new Problem("payload_too_large", `an import is limited to ${MAX_IMPORT_BYTES} bytes`);
      try {
        pending += decoder.decode(value, { stream: true });
      } catch {
        throw refused(line + 1, "not UTF-8");
      }
      let stop = pending.indexOf("\n");
      while (stop >= 0) {
        yield { line: ++line, text: pending.slice(0, stop) };
        pending = pending.slice(stop + 1);
        stop = pending.indexOf("\n");
      }
    }
  } finally {
    reader.releaseLock();
  }
  if (pending !== "") yield { line: ++line, text: pending };
}

function parseJson(line: number, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw refused(line, "not JSON");
  }
}

function schemaError(line: number, issue: { path: PropertyKey[]; message: string } | undefined): Problem {
  const path = issue?.path.map(String).join(".") ?? "";
  return refused(line, `${path === "" ? "" : `${path}: `}${issue?.message ?? "invalid"}`);
}

const sameAddress = (a: Address, b: Address): boolean =>
  a.namespace === b.namespace && a.key === b.key && "session" in a.scope && "session" in b.scope;

/**
 * Stage `body` into `storage` (empty): every line validated and committed in order, the creating commit's
 * incarnation replaced by `incarnation`. Throws `invalid_import` naming the first bad line; the caller
 * wipes the object then. Resolves with the header.
 */
export async function stageImport(
  storage: SqliteStorage,
  body: ReadableStream<Uint8Array>,
  incarnation: string,
): Promise<ExportHeader> {
  const incarnationAddress = bind(incarnationValue, {});
  let header: ExportHeader | undefined;
  let last = 0;
  for await (const { line, text } of bodyLines(body)) {
    last = line;
    const json = parseJson(line, text);
    if (header === undefined) {
      const parsed = exportHeader.safeParse(json);
      if (!parsed.success) throw schemaError(line, parsed.error.issues[0]);
      if (parsed.data.redacted) throw refused(line, "a user's (redacted) export cannot be imported");
      header = parsed.data;
      continue;
    }
    const parsed = exportBatchLine.safeParse(json);
    if (!parsed.success) throw schemaError(line, parsed.error.issues[0]);
    if (parsed.data.first !== storage.lastSeq + 1)
      throw refused(line, `first must be ${storage.lastSeq + 1} (the batches number every sequence in order)`);
    const writes = (parsed.data.writes as unknown as MainWrite[]).map((w): MainWrite =>
      w.type === "value.set" && typeof w.addr === "object" && w.addr !== null && sameAddress(w.addr, incarnationAddress)
        ? { ...w, value: incarnation }
        : w,
    );
    const batch: CommitBatch = { kind: "main", writes };
    try {
      await storage.commit(batch);
    } catch (error) {
      if (error instanceof StorageError) throw refused(line, error.message);
      throw error;
    }
  }
  if (header === undefined) throw refused(1, "the body is empty: an export starts with its header line");
  if (storage.lastSeq !== header.lastSeq)
    throw refused(last + 1, `the export ends at sequence ${storage.lastSeq}; its header says ${header.lastSeq}`);
  if ((await storage.scanConversations({ limit: 1 })).items.length === 0)
    throw refused(last, "the export holds no conversation");
  return header;
}

/** The settling commit: live tasks marked for abort, schedules paused, both recorded. */
export async function settleImported(storage: SqliteStorage): Promise<ImportSettlement> {
  const aborted: Id[] = [];
  const paused: Id[] = [];
  const writes: MainWrite[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanTasks({ live: true, limit: 200, ...(after === undefined ? {} : { after }) });
    for (const task of page.items) {
      if (task.kind === "schedule") {
        paused.push(task.id);
        writes.push({ type: "value.set", addr: bind(schedulePaused(task.id), {}), value: true });
      } else {
        aborted.push(task.id);
        // A task marked before the export (an operator's or a user's abort) keeps that mark, with no reason.
        if (task.abort === true) continue;
        writes.push({ type: "patch", id: task.id, role: liveRole(task), state: task.state, abort: true });
        writes.push({ type: "value.set", addr: abortReasonValue(task.id), value: "imported" });
      }
    }
    if (page.next === undefined) break;
    after = page.next;
  }
  const settlement: ImportSettlement = { reason: "imported", aborted, paused };
  if (aborted.length === 0 && paused.length === 0) return settlement;
  const record = settlement as unknown as JsonObject;
  writes.push({ type: "value.set", addr: bind(importedValue, {}), value: record });
  await storage.commit({ kind: "main", writes });
  return settlement;
}

function liveRole(task: Task): "start" | "inflight" {
  if (task.role === "terminal") throw new StorageError("corrupt", `task ${task.id} is not live`);
  return task.role;
}

/** KV flag while an import stages: a leftover means an import died midway. */
const IMPORT_STAGING_KEY = "edge.import.staging";

/** The export's header line: what the session is, and the product data pico storage does not hold. */
export function sessionExportHeader(
  kv: SyncKvStorage,
  at: {
    readonly name: string;
    readonly redacted: boolean;
    readonly incarnation: string | undefined;
    readonly lastSeq: number;
    readonly meta: DirectoryMeta | undefined;
    readonly profile: string | undefined;
  },
): ExportHeader {
  const owner = readOwner(kv);
  const template = kv.get<TemplateBinding>(TEMPLATE_KEY);
  return {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    session: at.name,
    ...(at.incarnation === undefined ? {} : { incarnation: at.incarnation }),
    lastSeq: at.lastSeq,
    redacted: at.redacted,
    ...(owner === undefined ? {} : { owner }),
    ...(at.meta?.title === undefined ? {} : { title: at.meta.title }),
    labels: at.meta?.labels ?? [],
    metadata: at.meta?.metadata ?? {},
    ...(template === undefined ? {} : { template }),
    ...(at.profile === undefined ? {} : { profile: at.profile }),
  };
}

/**
 * Stage `body` (an export) into this object's storage, which must hold no session; only when every line
 * validated are the owner and template written and `link` called (the object opens the session and links it
 * in the directory), its live work settled. A bad line throws `invalid_import` naming it, and the object is
 * wiped: nothing is left behind.
 */
export async function importInto(
  storage: DurableObjectStorage,
  session: string,
  body: ReadableStream<Uint8Array>,
  exists: (host: SqlHost) => boolean,
  link: (header: ExportHeader) => Promise<void>,
): Promise<ImportResponse> {
  const kv = storage.kv;
  // An import cut short by an eviction left its staging behind: nobody links or opens it, so it goes.
  if (kv.get(IMPORT_STAGING_KEY) !== undefined) await storage.deleteAll();
  if (exists(storage))
    throw new Problem("conflict", `session ${session} exists: import into a new name, or delete it first`);
  kv.put(IMPORT_STAGING_KEY, true);
  const incarnation = mintIncarnation();
  const staged = SqliteStorage.open(storage);
  let header: ExportHeader;
  let settlement: ImportSettlement;
  try {
    header = await stageImport(staged, body, incarnation);
    settlement = await settleImported(staged);
  } catch (error) {
    await staged.close();
    await storage.deleteAll();
    throw error;
  }
  await staged.close();
  recordOwner(kv, header.owner);
  if (header.template !== undefined) kv.put(TEMPLATE_KEY, header.template);
  kv.delete(IMPORT_STAGING_KEY);
  await link(header);
  return {
    session,
    incarnation,
    lastSeq: staged.lastSeq,
    aborted: [...settlement.aborted],
    paused: [...settlement.paused],
  };
}
