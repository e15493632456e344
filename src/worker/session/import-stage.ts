/**
 * The storage side of a session import (docs/operations.md "Export and import"): staging an export's lines into an
 * empty SQLite storage, and the writes of the settling commit that makes the staged rows a session. Used by the
 * SessionObject's import (session/transfer.ts) and by `bench:export` (which runs it over node:sqlite), so nothing
 * here knows Durable Objects.
 *
 * Staging: each line is split in one pass (session/import-lines.ts), parsed, refused when it nests too deep, checked
 * against the wire schema and committed through `SqliteStorage` (which checks ids, references and structure, §7.3),
 * so the ids of the export are kept; the first bad line stops it. What must not come back is replaced by the
 * export's own placeholder write (so every later id still lands where it was): the outbox (`edge.outbox`: events
 * the source sent or will send), a retention expiry mark, and the inbound endpoints with their delivery records (an
 * endpoint's secret is sealed for its session's name: left out, and named in the import's answer). The incarnation
 * a line sets is the new one.
 *
 * Settling: every live task but a schedule and the rig's witness is marked for abort (its kind's abort handler
 * settles it once the session opens) with the abort reason `imported`; schedules are paused; a rig is paused
 * (`rig.paused`: GUPP and the witness wait for an operator); an export without an incarnation (older than them) gets
 * the new one; and `edge.session.imported` records what was settled.
 */
import { bind } from "../../core/state.js";
import { sessionValue } from "../../core/state.js";
import { schedulePaused } from "../../kinds/schedule.js";
import type { Address, CommitBatch, Id, JsonObject, MainWrite, Task } from "../../storage/records.js";
import { GAP_NAMESPACE } from "../../storage/sqlite-export.js";
import { StorageError } from "../../storage/storage.js";
import type { SqliteStorage } from "../../storage/sqlite.js";
import { exportBatchLine, exportHeader, type ExportHeader } from "../../api/transfer.js";
import { AGENT_NAMESPACE, rigPaused, witnessTask } from "../../rig/state.js";
import { WITNESS_KIND } from "../../rig/witness.js";
import { incarnationValue } from "./config.js";
import { abortReasonValue } from "./abort-reasons.js";
import { MAX_IMPORT_DEPTH, nestsDeeperThan, refusedLine, splitLines, type SplitStats } from "./import-lines.js";

/** What an import settled, recorded in the session (session value `edge.session.imported`). */
export interface ImportSettlement {
  readonly reason: "imported";
  readonly aborted: readonly Id[];
  readonly paused: readonly Id[];
  /** Whether the rig was paused (`rig.paused`); absent in records written before it. */
  readonly rigPaused?: boolean;
}

export const importedValue = sessionValue<ImportSettlement>("edge.session.imported");

/** Session namespaces an import never carries: events out, and a retention expiry the source was going through. */
const NOT_CARRIED: ReadonlySet<string> = new Set(["edge.outbox", "edge.retention.expired"]);
/** Inbound endpoints (their secrets are sealed for the source's name) and the delivery records that go with them. */
export const INBOUND_NAMESPACE = "edge.inbound";
export const INBOUND_RECORDS: ReadonlySet<string> = new Set([INBOUND_NAMESPACE, "edge.replay", "edge.replay-expiry"]);

/** Whether an export leaves out the write at `addr` (every export: the outbox and an expiry mark). */
export function notExported(addr: Address): boolean {
  return "session" in addr.scope && NOT_CARRIED.has(addr.namespace);
}

/** Whether a user's export leaves out the write at `addr`: also the operator's inbound configuration. */
export function notExportedToUser(addr: Address): boolean {
  return notExported(addr) || ("session" in addr.scope && INBOUND_RECORDS.has(addr.namespace));
}

const PLACEHOLDER: MainWrite = {
  type: "value.delete",
  addr: { scope: { session: true }, namespace: GAP_NAMESPACE, rewind: false },
};

/** What staging found beside the header. */
export interface Staged {
  readonly header: ExportHeader;
  /** Whether a line set the incarnation (an export older than incarnations has none). */
  readonly incarnation: boolean;
  /** The inbound endpoints the export held, left out. */
  readonly inbound: readonly string[];
}

function schemaError(line: number, issue: { path: PropertyKey[]; message: string } | undefined): Error {
  const path = issue?.path.map(String).join(".") ?? "";
  return refusedLine(line, `${path === "" ? "" : `${path}: `}${issue?.message ?? "invalid"}`);
}

function parseJson(line: number, text: string): unknown {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw refusedLine(line, "not JSON");
  }
  if (nestsDeeperThan(json, MAX_IMPORT_DEPTH))
    throw refusedLine(line, `a value nests deeper than ${MAX_IMPORT_DEPTH} levels`);
  return json;
}

function addressOf(write: MainWrite): Address | undefined {
  const addr = (write as { addr?: unknown }).addr;
  if (typeof addr !== "object" || addr === null) return undefined;
  const a = addr as Partial<Address>;
  if (typeof a.namespace !== "string" || typeof a.scope !== "object" || a.scope === null) return undefined;
  return addr as Address;
}

/**
 * Stage `body` (an export) into `storage` (empty): every line validated and committed in order, what an import does
 * not carry replaced by the placeholder write, the incarnation a line sets replaced by `incarnation`. `admit` sees
 * the header before any batch is staged (and may refuse the import). Throws `invalid_import` naming the first bad
 * line. `stats` counts the splitter's work (benchmarks).
 */
export async function stageImport(
  storage: SqliteStorage,
  body: ReadableStream<Uint8Array>,
  incarnation: string,
  admit: (header: ExportHeader) => Promise<void> = async () => undefined,
  stats?: SplitStats,
): Promise<Staged> {
  let header: ExportHeader | undefined;
  let last = 0;
  let incarnationSet = false;
  const inbound = new Set<string>();
  const carried = (write: MainWrite): MainWrite => {
    const addr = addressOf(write);
    if (addr === undefined || !("session" in addr.scope)) return write;
    if (NOT_CARRIED.has(addr.namespace)) return PLACEHOLDER;
    if (INBOUND_RECORDS.has(addr.namespace)) {
      if (addr.namespace === INBOUND_NAMESPACE && addr.key !== undefined) {
        if (write.type === "value.set") inbound.add(addr.key);
        else inbound.delete(addr.key);
      }
      return PLACEHOLDER;
    }
    if (write.type === "value.set" && addr.namespace === incarnationValue.namespace) {
      incarnationSet = true;
      return { ...write, value: incarnation };
    }
    return write;
  };
  for await (const { line, text } of splitLines(body, stats)) {
    last = line;
    const json = parseJson(line, text);
    if (header === undefined) {
      const parsed = exportHeader.safeParse(json);
      if (!parsed.success) throw schemaError(line, parsed.error.issues[0]);
      if (parsed.data.redacted) throw refusedLine(line, "a user's (redacted) export cannot be imported");
      header = parsed.data;
      await admit(header);
      continue;
    }
    const parsed = exportBatchLine.safeParse(json);
    if (!parsed.success) throw schemaError(line, parsed.error.issues[0]);
    if (parsed.data.first !== storage.lastSeq + 1)
      throw refusedLine(line, `first must be ${storage.lastSeq + 1} (the batches number every sequence in order)`);
    const batch: CommitBatch = { kind: "main", writes: (parsed.data.writes as unknown as MainWrite[]).map(carried) };
    try {
      await storage.commit(batch);
    } catch (error) {
      if (error instanceof StorageError) throw refusedLine(line, error.message);
      throw error;
    }
  }
  if (header === undefined) throw refusedLine(1, "the body is empty: an export starts with its header line");
  if (storage.lastSeq !== header.lastSeq)
    throw refusedLine(last + 1, `the export ends at sequence ${storage.lastSeq}; its header says ${header.lastSeq}`);
  if ((await storage.scanConversations({ limit: 1 })).items.length === 0)
    throw refusedLine(last, "the export holds no conversation");
  return { header, incarnation: incarnationSet, inbound: [...inbound].sort() };
}

function liveRole(task: Task): "start" | "inflight" {
  if (task.role === "terminal") throw new StorageError("corrupt", `task ${task.id} is not live`);
  return task.role;
}

/**
 * The settling commit's writes over the staged storage: live tasks marked for abort (but schedules, paused, and the
 * rig's witness, kept: the rig's pause stops it), the rig paused when there is one, the incarnation when no line
 * set it, and the record of it all. Empty when there is nothing to settle.
 */
export async function settlingWrites(
  storage: SqliteStorage,
  staged: Staged,
  incarnation: string,
  now: number,
): Promise<{ readonly settlement: ImportSettlement; readonly writes: readonly MainWrite[] }> {
  const aborted: Id[] = [];
  const paused: Id[] = [];
  const writes: MainWrite[] = [];
  let witness = false;
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanTasks({ live: true, limit: 200, ...(after === undefined ? {} : { after }) });
    for (const task of page.items) {
      if (task.kind === "schedule") {
        paused.push(task.id);
        writes.push({ type: "value.set", addr: bind(schedulePaused(task.id), {}), value: true });
      } else if (task.kind === WITNESS_KIND) {
        witness = true;
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
  const agents = await storage.scanValues({ scope: { session: true }, namespace: AGENT_NAMESPACE, limit: 1 });
  const rig = witness || agents.items.length > 0 || (await storage.getValue(bind(witnessTask, {}))) !== undefined;
  if (rig) writes.push({ type: "value.set", addr: bind(rigPaused, {}), value: { reason: "imported", at: now } });
  if (!staged.incarnation) writes.push({ type: "value.set", addr: bind(incarnationValue, {}), value: incarnation });
  const settlement: ImportSettlement = { reason: "imported", aborted, paused, ...(rig ? { rigPaused: true } : {}) };
  if (aborted.length > 0 || paused.length > 0 || rig)
    writes.push({ type: "value.set", addr: bind(importedValue, {}), value: settlement as unknown as JsonObject });
  return { settlement, writes };
}
