/**
 * §10.2 "100,000 historical children, two live tasks" (§6.2): open seeds only the live tasks and the
 * ancestry they need, and later completions use the live indexes, never a traversal of finished
 * children. The test builds 1,000 and then 20,000 finished child conversations (100,000 is the
 * benchmark's size) and checks that what open reads does not change: SQLite rows read (counted by the
 * storage: what Cloudflare bills) on SQLite, and the storage calls made (no conversation scans, no terminal task
 * scans, same records returned) on memory.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { Harness } from "../../src/core/harness.js";
import { erase } from "../../src/core/task-kind.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Conversation, ConversationQuery, Id, Page, Task, TaskQuery } from "../../src/storage/records.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import { CountingStorage } from "./counting-storage.js";
import { call, settleStep, stepKind } from "./driver-fixtures.js";

/** Counts reads and records which scans were asked for. */
class ScanSpy extends CountingStorage {
  readonly taskScans: TaskQuery[] = [];
  conversationScans = 0;

  override scanTasks(q: TaskQuery): Promise<Page<Task>> {
    this.taskScans.push(q);
    return super.scanTasks(q);
  }

  override scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    this.conversationScans += 1;
    return super.scanConversations(q);
  }
}

const child = stepKind("hchild");
const tool = stepKind("htool", {
  execute: async (task, rt, c) => {
    await (await rt.conversation(task.state.refs[0] as Id, c))?.drive(c);
    await settleStep(rt, task, "done", c);
  },
});
const kinds = [erase(tool), erase(child)];

/** Append `n` finished children of the root: a terminal tool task owning a conversation that holds one
 * terminal child task, written in large batches (history building, not driving). */
async function addFinishedChildren(h: Harness, n: number): Promise<void> {
  const perBatch = 1000;
  for (let done = 0; done < n; done += perBatch) {
    const count = Math.min(perBatch, n - done);
    await h.commitInternal((b) => {
      for (let i = 0; i < count; i++) {
        const owner = h.storage.lastSeq + b.writes.length + 1;
        b.push({
          type: "task",
          task: {
            id: owner,
            conversationId: h.rootId,
            kind: "htool",
            role: "terminal",
            state: { status: "done", tag: "old", refs: [owner + 1] },
            after: [],
            owns: [owner + 1],
          },
        });
        const conversation = b.createConversation({ owner });
        b.push({
          type: "task",
          task: {
            id: conversation + 1,
            conversationId: conversation,
            kind: "hchild",
            role: "terminal",
            state: { status: "done", tag: "old", refs: [] },
            after: [],
          },
        });
      }
    }, call);
  }
}

/** Two live tasks: a tool in the root owning a conversation with one live child task in it. */
async function addLivePair(h: Harness): Promise<[Id, Id]> {
  return h.commit((tx) => {
    const next = h.storage.lastSeq + 1;
    const owner = tx.task(tool, {
      conversationId: h.rootId,
      state: { status: "pending", tag: "live", refs: [next + 1] },
      owns: [next + 1],
    });
    const conversation = tx.createConversation({ owner });
    const x = tx.task(child, {
      conversationId: conversation,
      state: { status: "pending", tag: "live.child", refs: [] },
    });
    return [owner, x] as [Id, Id];
  }, call);
}

interface Measured {
  readonly open: number;
  readonly drive: number;
}

/** Open a fresh harness over `storage`, measuring `reads()` around open and around driving to idle. */
async function measure(storage: Storage, reads: () => number, live: readonly Id[]): Promise<Measured> {
  const before = reads();
  const h = await Harness.open(storage, { taskKinds: kinds }, call);
  const open = reads() - before;
  const seen = await h.inspect(call);
  expect([...seen.start, ...seen.inflight].map((t) => t.id).sort((a, b) => a - b)).toEqual([...live]);
  const beforeDrive = reads();
  expect(await h.drive(call)).toBe("idle");
  const drive = reads() - beforeDrive;
  for (const id of live) expect((await storage.getTasks([id])).get(id)?.state.status).toBe("done");
  return { open, drive };
}

let counter = 0;

for (const backend of coreBackends) {
  describe(`driver open over a long history (${backend.name})`, () => {
    it(`§10.2 100,000 historical children, two live tasks (${backend.name})`, async () => {
      if (backend.name === "memory") {
        const memory = new MemoryStorage();
        const builder = await Harness.open(memory, { taskKinds: kinds }, call);
        await addFinishedChildren(builder, 1000);
        const live1 = await addLivePair(builder);
        const spy1 = new ScanSpy(memory);
        const small = await measure(spy1, () => spy1.counts.rows, live1);
        const calls1 = { ...spy1.counts };

        const builder2 = await Harness.open(memory, { taskKinds: kinds }, call);
        await addFinishedChildren(builder2, 19_000);
        // The builder saw 19,000 conversations created; it keeps only the ancestry live work needs.
        expect(builder2.driver.ancestrySize).toBeLessThanOrEqual(512);
        const live2 = await addLivePair(builder2);
        const spy2 = new ScanSpy(memory);
        const large = await measure(spy2, () => spy2.counts.rows, live2);

        expect(large).toEqual(small);
        expect(spy2.counts.calls).toBe(calls1.calls);
        for (const spy of [spy1, spy2]) {
          expect(spy.conversationScans).toBe(0);
          // Open scans live tasks only; nothing scans terminal history.
          expect(spy.taskScans.every((q) => q.live === true)).toBe(true);
        }
        expect(small.open).toBeLessThanOrEqual(8); // 2 live tasks, 2 conversations, 1 owner task
        return;
      }
      // SQLite: one Durable Object; a fresh storage object per phase so no cache carries over.
      counter += 1;
      const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`driver-history-${Date.now()}-${counter}`));
      await runInDurableObject(stub, async (_instance, state) => {
        const builder = await Harness.open(SqliteStorage.open(state.storage), { taskKinds: kinds }, call);
        await addFinishedChildren(builder, 1000);
        const live1 = await addLivePair(builder);
        const s1 = SqliteStorage.open(state.storage);
        const small = await measure(s1, () => s1.stats.rowsRead, live1);

        const builder2 = await Harness.open(SqliteStorage.open(state.storage), { taskKinds: kinds }, call);
        await addFinishedChildren(builder2, 19_000);
        const live2 = await addLivePair(builder2);
        const s2 = SqliteStorage.open(state.storage);
        const large = await measure(s2, () => s2.stats.rowsRead, live2);

        expect(large.open).toBe(small.open);
        expect(large.drive).toBe(small.drive);
        expect(small.open).toBeGreaterThan(0);
      });
    }, 30_000);
  });
}
