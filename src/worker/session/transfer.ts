/**
 * A session's export and import (docs/operations.md "Export and import"), used by the SessionObject
 * (object.ts) for GET and POST /v1/sessions/{session}/export|import.
 *
 * The export is JSONL: one header line (`exportHeader`, src/api/transfer.ts) with the product data pico
 * storage does not hold, then the §7.3 batches storage/sqlite-export.ts rebuilds from SQLite in sequence
 * order, pulled one line at a time into a ReadableStream (never the whole session in memory). Nothing of the outbox
 * is exported. A user's export is marked `redacted`: no remote URL, no remote server's text (session/user-export.ts)
 * and none of the operator's inbound configuration.
 *
 * The import stages into a fresh object (session/import-stage.ts) under a KV flag: while the flag is set the rows are
 * no session (session/created.ts), so every route answers 404 and nothing opens a harness over them. One settling
 * transaction then makes them a session: the settling commit (live work settled, schedules and the rig paused, the
 * new incarnation) together with the owner, template binding, retention and import boundary in KV, and the flag's
 * removal, the directory row (pending: sent right after, or by the alarm the next open arms) and the import's answer
 * with the body's SHA-256. A bad line wipes the object; a kill before the settling commit leaves the flagged staging,
 * which the next import of the name wipes first. A kill after it (before the directory heard of the session) leaves a
 * session that is not listed yet: a retried import of the name sends the row, and answers what the first import
 * answered when its body is the same (by its SHA-256), 409 otherwise.
 */
import type { MainWrite } from "../../storage/records.js";
import type { SqlHost } from "../../storage/sql.js";
import { exportLines } from "../../storage/sqlite-export.js";
import { EXPORT_FORMAT, EXPORT_VERSION, type ExportHeader } from "../../api/transfer.js";
import { Problem } from "../problems.js";
import { mintIncarnation } from "./config.js";
import { forgetOwner, readOwner, recordOwner } from "../identity/owner.js";
import { TEMPLATE_KEY, type TemplateBinding } from "../directory/templates.js";
import type { DirectoryMeta } from "./directory-link.js";
import type { ImportResponse } from "../../api/transfer.js";
import { SqliteStorage } from "../../storage/sqlite.js";
import { UserExportRedactor } from "./user-export.js";
import { afterImportSettle, beforeImportSettle } from "../platform/host-config.js";
import { IMPORT_STAGING_KEY, IMPORTED_THROUGH_KEY } from "./created.js";
import { notExported, notExportedToUser, settlingWrites, stageImport, type Staged } from "./import-stage.js";

export { importedValue, type ImportSettlement } from "./import-stage.js";

export { EXPORT_FORMAT, EXPORT_VERSION };

/** The export as a byte stream: the header line, then the batch lines, pulled one at a time. */
export function exportStream(host: SqlHost, header: ExportHeader): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let lines: Generator<string, void, undefined> | undefined;
  const user = header.redacted ? new UserExportRedactor() : undefined;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (lines === undefined) {
        lines = exportLines(host, header.lastSeq, header.redacted ? notExportedToUser : notExported);
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

/** The directory row's fields an export's header gives the imported session. */
export function importedRow(header: ExportHeader): {
  readonly title?: string;
  readonly labels: readonly string[];
  readonly metadata: Readonly<Record<string, string>>;
} {
  return {
    ...(header.title === undefined ? {} : { title: header.title }),
    labels: header.labels,
    metadata: header.metadata,
  };
}

/** What an import asks of the object it runs in. */
export interface ImportHost {
  /** Whether a created session is here (a conflict). */
  readonly exists: () => boolean;
  /** Whether a harness is open over this object's storage (then nothing may be wiped). */
  readonly open: () => boolean;
  /** The header is read, nothing staged yet: refuse the import (throw), or prepare what settling needs. */
  readonly admit: (header: ExportHeader) => Promise<void>;
  /** Inside the settling transaction: the object's own KV records of the new session (its retention, its pending row). */
  readonly settle: (header: ExportHeader) => void;
  /** After the settling transaction (or on a retry after a kill): open the session and send its directory row. */
  readonly link: () => Promise<void>;
  /** The staging was wiped: forget what `admit` or `settle` kept in memory. */
  readonly wiped: () => void;
  readonly now: () => number;
}

/** KV: what an import answered, and the SHA-256 of its body (hex), for a retry after a kill (the file comment). */
export const IMPORT_ANSWER_KEY = "edge.import.answer";

interface ImportRecord {
  readonly digest: string;
  readonly answer: ImportResponse;
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** `body` as it is read, its bytes also written to `digest` (backpressure holds: nothing is buffered beside it). */
function digested(body: ReadableStream<Uint8Array>, digest: DigestStream): ReadableStream<Uint8Array> {
  const writer = digest.getWriter();
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      async transform(chunk, controller) {
        controller.enqueue(chunk);
        await writer.write(chunk.slice());
      },
      async flush() {
        await writer.close();
      },
    }),
  );
}

/** The SHA-256 of all of `body`, hex. */
async function digestOf(body: ReadableStream<Uint8Array>): Promise<string> {
  const digest = new crypto.DigestStream("SHA-256");
  await body.pipeTo(digest);
  return hex(await digest.digest);
}

/**
 * Stage `body` (an export) into this object's storage, which must hold no session, then settle it in one transaction
 * and link it (see the file comment). A bad line throws `invalid_import` naming it, and the object is wiped: nothing
 * is left behind. On a session an import settled, a retry links it and answers as the first did (same body).
 */
export async function importInto(
  storage: DurableObjectStorage,
  session: string,
  body: ReadableStream<Uint8Array>,
  host: ImportHost,
): Promise<ImportResponse> {
  const kv = storage.kv;
  const wipe = async (): Promise<void> => {
    // Never under a running harness: flagged staging is no session, so none is open over it.
    if (host.open()) throw new Problem("conflict", `session ${session} is open: its storage is not wiped`);
    await storage.deleteAll();
    forgetOwner(kv);
    host.wiped();
  };
  // An import cut short (a kill before its settling commit) left its flagged staging behind: no session, so it goes.
  if (kv.get(IMPORT_STAGING_KEY) !== undefined) await wipe();
  if (host.exists()) {
    const first = kv.get<ImportRecord>(IMPORT_ANSWER_KEY);
    if (first !== undefined) {
      // Imported here: a kill may have cut the import between its settling and its directory row.
      await host.link();
      if ((await digestOf(body)) === first.digest) return first.answer;
    }
    throw new Problem("conflict", `session ${session} exists: import into a new name, or delete it first`);
  }
  kv.put(IMPORT_STAGING_KEY, true);
  const incarnation = mintIncarnation();
  // The settling commit's transaction also writes the object's KV records of the new session and drops the flag.
  let alongside: (() => void) | undefined;
  const settlingHost: SqlHost = {
    sql: storage.sql,
    transactionSync: <T>(fn: () => T): T =>
      storage.transactionSync(() => {
        const result = fn();
        alongside?.();
        return result;
      }),
  };
  const staged = SqliteStorage.open(settlingHost);
  const digest = new crypto.DigestStream("SHA-256");
  let result: Staged;
  try {
    result = await stageImport(staged, digested(body, digest), incarnation, host.admit);
  } catch (error) {
    await staged.close();
    await wipe();
    throw error;
  }
  // The cut point of tests: a throw here is a kill (nothing is wiped; the staging stays flagged).
  beforeImportSettle();
  const { header } = result;
  const bodyDigest = hex(await digest.digest);
  let answer: ImportResponse | undefined;
  const settled = (): void => {
    recordOwner(kv, header.owner);
    if (header.template !== undefined) kv.put(TEMPLATE_KEY, header.template);
    kv.put(IMPORTED_THROUGH_KEY, header.lastSeq);
    host.settle(header);
    if (answer !== undefined) kv.put(IMPORT_ANSWER_KEY, { digest: bodyDigest, answer } satisfies ImportRecord);
    kv.delete(IMPORT_STAGING_KEY);
  };
  try {
    const settling = await settlingWrites(staged, result, incarnation, host.now());
    const { settlement } = settling;
    answer = {
      session,
      incarnation,
      // The settling commit numbers one sequence per write.
      lastSeq: staged.lastSeq + settling.writes.length,
      aborted: [...settlement.aborted],
      paused: [...settlement.paused],
      rigPaused: settlement.rigPaused === true,
      omitted: { inbound: [...result.inbound] },
    };
    if (settling.writes.length === 0) storage.transactionSync(settled);
    else {
      alongside = settled;
      await staged.commit({ kind: "main", writes: settling.writes as MainWrite[] });
      alongside = undefined;
    }
  } catch (error) {
    await staged.close();
    await wipe();
    throw error;
  }
  await staged.close();
  // The cut point of tests: a throw here is a kill after the settling transaction, before the directory heard.
  afterImportSettle();
  await host.link();
  return answer;
}
