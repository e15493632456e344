/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * "100,000 historical children, two live tasks" (§6.2, §10.2): open reads the live seed and the ancestry
 * it needs, never the finished children. Prints SQLite rows read and time at open and per later
 * completion, with 1,000 and with 100,000 finished children, each in its own Durable Object. Times are
 * workerd's coarse clock (it advances on I/O); rows read are exact and the figure that matters.
 *
 * Run: npm run bench:open
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness } from "../../src/core/harness.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { defineTaskKind, erase } from "../../src/core/task-kind.js";
import type { MainWrite } from "../../src/storage/records.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";

const call = BACKGROUND_CONTEXT;
type S = { status: "pending"; n: number } | { status: "done"; n: number };
const quick = defineTaskKind<S, TaskRuntime>()({
  kind: "quick",
  roles: { pending: "start", done: "terminal" },
  initialStatus: "pending",
  async execute(task, runtime, c) {
    await runtime.commit((tx) => tx.settle(task, "done", { n: task.state.n }), c);
  },
  recover: async () => undefined,
  abort: async () => undefined,
});

/** Root (1), then N finished child tasks each owning a child conversation with one entry. */
async function build(storage: SqliteStorage, children: number): Promise<void> {
  await storage.commit({ kind: "main", writes: [{ type: "createConversation", conversation: { id: 1 } }] });
  const perBatch = 2_000;
  for (let done = 0; done < children; done += perBatch) {
    const writes: MainWrite[] = [];
    let seq = storage.lastSeq;
    for (let i = 0; i < Math.min(perBatch, children - done); i++) {
      const task = ++seq;
      writes.push({
        type: "task",
        task: {
          id: task,
          conversationId: 1,
          kind: "quick",
          role: "terminal",
          state: { status: "done", n: i },
          after: [],
          background: true,
        },
      });
      const child = ++seq;
      writes.push({ type: "createConversation", conversation: { id: child, owner: task } });
      const entry = ++seq;
      writes.push({ type: "entry", entry: { id: entry, conversationId: child, kind: "notice", data: { i } } });
    }
    await storage.commit({ kind: "main", writes });
  }
  // Two live tasks: one in the root, one in the newest child (its ancestry must load; no other child's).
  let seq = storage.lastSeq;
  const lastChild = seq - 1;
  await storage.commit({
    kind: "main",
    writes: [
      {
        type: "task",
        task: {
          id: ++seq,
          conversationId: 1,
          kind: "quick",
          role: "start",
          state: { status: "pending", n: -1 },
          after: [],
        },
      },
      {
        type: "task",
        task: {
          id: ++seq,
          conversationId: lastChild,
          kind: "quick",
          role: "start",
          state: { status: "pending", n: -2 },
          after: [],
        },
      },
    ],
  });
}

interface Figures {
  children: number;
  openRows: number;
  openMs: number;
  completionRows: number;
  completionMs: number;
}

async function measure(children: number): Promise<Figures> {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-open-${children}-${Date.now()}`));
  return runInDurableObject(stub, async (_instance, state) => {
    await build(SqliteStorage.open(state.storage), children);
    const storage = SqliteStorage.open(state.storage); // a fresh open, as after an eviction
    const r0 = storage.stats.rowsRead;
    const t0 = performance.now();
    const harness = await Harness.open(storage, { taskKinds: [erase(quick)] }, call);
    const openMs = performance.now() - t0;
    const openRows = storage.stats.rowsRead - r0;
    const r1 = storage.stats.rowsRead;
    const t1 = performance.now();
    await harness.drive(call);
    const completionMs = (performance.now() - t1) / 2;
    const completionRows = (storage.stats.rowsRead - r1) / 2;
    return { children, openRows, openMs, completionRows, completionMs };
  });
}

it("open with 1,000 and 100,000 finished children and two live tasks (sqlite)", async () => {
  const small = await measure(1_000);
  const large = await measure(100_000);
  console.log("\nbench/open — SQLite in a Durable Object (rows exact; ms from workerd's coarse clock)");
  console.log("children  | open rows read | open ms | rows read per completion | ms per completion");
  for (const f of [small, large]) {
    console.log(
      `${String(f.children).padStart(9)} | ${String(f.openRows).padStart(14)} | ${f.openMs.toFixed(1).padStart(7)} | ${String(f.completionRows).padStart(24)} | ${f.completionMs.toFixed(2).padStart(17)}`,
    );
  }
  expect(large.openRows).toBe(small.openRows);
  expect(large.completionRows).toBe(small.completionRows);
}, 600_000);
