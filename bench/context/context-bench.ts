/**
 * The context benchmark's workload and measurement (§2.2, §10.3), shared by the workerd run (memory and
 * SQLite in a Durable Object, context.bench.ts) and the Node run (memory with a high-resolution clock,
 * context.node.bench.ts). A 10,000-entry conversation with a summary head every 500 entries; the tip is
 * just before the next head, so the cold range since the newest head is at its largest (~540 entries).
 */
import { expect } from "vitest";
import { ContextCache, requestMessages } from "../../src/core/context.js";
import type { Entry, Id, MainWrite } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { assistant, toolResult, user } from "../../test/core/context-fixtures.js";
import { CountingStorage } from "../../test/core/counting-storage.js";

export const ENTRIES = 10_000;
const HEAD_EVERY = 500;
/** Entries a summary keeps before itself (its boundary is `id - RETAIN`). */
const RETAIN = 40;
const BATCH = 100;
const COLD_RUNS = 100;
const WARM_RUNS = 200;

/** Entry number n (1-based) of the history: exchanges with tool calls, edits, and periodic heads. */
function entryAt(conversationId: Id, id: Id, n: number): Entry {
  if (n % HEAD_EVERY === 1 && n > 1) {
    return {
      id,
      conversationId,
      kind: "summary",
      model: [user(`summary through ${id - RETAIN - 1}`)],
      head: id - RETAIN,
    };
  }
  switch (n % 5) {
    case 1:
      return { id, conversationId, kind: "user", model: [user(`question ${n}`)] };
    case 2:
      return { id, conversationId, kind: "assistant", model: [assistant(`thinking ${n}`, { calls: [`c${n}`] })] };
    case 3:
      return {
        id,
        conversationId,
        kind: "tool_result",
        key: `c${n - 1}`,
        model: [toolResult(`c${n - 1}`, "x".repeat(200))],
      };
    case 4:
      // Every 50th entry prunes an earlier tool result; the others are plain answers.
      return n % 50 === 4
        ? {
            id,
            conversationId,
            kind: "assistant",
            model: [assistant(`answer ${n}`)],
            edits: [{ target: id - 1, action: "replace", messages: [toolResult(`c${n - 2}`, "pruned")] }],
          }
        : { id, conversationId, kind: "assistant", model: [assistant(`answer ${n}`)] };
    default:
      return { id, conversationId, kind: "notice", model: [user(`notice ${n}`)] };
  }
}

/** Conversation at 1, entries 2..ENTRIES+1, committed in batches. */
async function build(storage: Storage): Promise<Id> {
  await storage.commit({ kind: "main", writes: [{ type: "createConversation", conversation: { id: 1 } }] });
  for (let n = 1; n <= ENTRIES; n += BATCH) {
    const writes: MainWrite[] = [];
    for (let k = n; k < n + BATCH && k <= ENTRIES; k++)
      writes.push({ type: "entry", entry: entryAt(1, storage.lastSeq + 1 + writes.length, k) });
    await storage.commit({ kind: "main", writes });
  }
  return 1;
}

export interface Figures {
  readonly coldMs: number;
  readonly coldRows: number;
  readonly coldCalls: number;
  readonly coldSqlRows?: number;
  readonly items: number;
  readonly requestMessages: number;
  readonly warmMs: number;
  readonly warmRows: number;
  readonly warmSqlRows?: number;
  readonly rangeSinceHead: number;
}

export async function measure(inner: Storage, sqlRows?: () => number): Promise<Figures> {
  const storage = new CountingStorage(inner);
  const conv = await build(storage);
  const head = await inner.newestHead(conv, inner.lastSeq);
  const rangeSinceHead = inner.lastSeq - (head?.head ?? 0) + 1;

  // Cold: a fresh handle's first contextEntries().
  storage.reset();
  let sql0 = sqlRows?.() ?? 0;
  let t0 = performance.now();
  let context = await new ContextCache(storage, conv).contextEntries();
  for (let i = 1; i < COLD_RUNS; i++) context = await new ContextCache(storage, conv).contextEntries();
  const coldMs = (performance.now() - t0) / COLD_RUNS;
  const cold = storage.reset();
  const coldItems = context.items.length;
  const coldMessages = requestMessages(context).length;
  const coldSqlRows = sqlRows === undefined ? undefined : (sqlRows() - sql0) / COLD_RUNS;

  // Warm: one append (committed, then observed as the commit line does), then contextEntries().
  const cache = new ContextCache(storage, conv);
  await cache.contextEntries();
  let warmMs = 0;
  let warmRows = 0;
  let warmSql = 0;
  for (let i = 0; i < WARM_RUNS; i++) {
    const id = storage.lastSeq + 1;
    const entry: Entry = { id, conversationId: conv, kind: "notice", model: [user(`appended ${i}`)] };
    const { last } = await storage.commit({ kind: "main", writes: [{ type: "entry", entry }] });
    storage.reset();
    sql0 = sqlRows?.() ?? 0;
    t0 = performance.now();
    cache.observe([entry], last);
    context = await cache.contextEntries();
    warmMs += performance.now() - t0;
    warmRows += storage.reset().rows;
    warmSql += (sqlRows?.() ?? 0) - sql0;
  }
  expect(context.through).toBe(storage.lastSeq);
  return {
    coldMs,
    coldRows: cold.rows / COLD_RUNS,
    coldCalls: cold.calls / COLD_RUNS,
    ...(coldSqlRows === undefined ? {} : { coldSqlRows, warmSqlRows: warmSql / WARM_RUNS }),
    items: coldItems,
    requestMessages: coldMessages,
    warmMs: warmMs / WARM_RUNS,
    warmRows: warmRows / WARM_RUNS,
    rangeSinceHead,
  };
}

export function report(backend: string, f: Figures): void {
  const lines = [
    `context bench (${backend}): ${ENTRIES} entries, summary head every ${HEAD_EVERY} (boundary id-${RETAIN}); range since newest head = ${f.rangeSinceHead} entries`,
    `  cold contextEntries: ${f.coldMs.toFixed(3)} ms, ${f.coldCalls} storage reads, ${f.coldRows} records read` +
      (f.coldSqlRows === undefined ? "" : `, ${f.coldSqlRows} SQLite rows read`),
    `  warm after one append: ${f.warmMs.toFixed(4)} ms, ${f.warmRows} records read` +
      (f.warmSqlRows === undefined ? "" : `, ${f.warmSqlRows} SQLite rows read`) +
      ` (mean of ${WARM_RUNS})`,
    `  context: ${f.items} items, ${f.requestMessages} request messages`,
  ];
  console.log(lines.join("\n"));
}
