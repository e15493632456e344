/**
 * SqliteStorage inside a real SQLite-backed Durable Object (workerd): schema versioning, atomic commits,
 * reopen, and the cost rules of §7.2/§7.5 measured in SQLite rows read and written (deterministic, so
 * asserted exactly; never wall-clock time). Every test uses its own object name.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type {
  Address,
  CommitBatch,
  Entry,
  EntryQuery,
  Id,
  JsonValue,
  MainWrite,
  Page,
} from "../../src/storage/records.js";
import { MIGRATIONS, SCHEMA_VERSION } from "../../src/storage/migrations.js";
import type { SqlHost, SqlValue } from "../../src/storage/sql.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { StorageError } from "../../src/storage/storage.js";

function stubFor(name: string) {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`sqlite-test:${name}`));
}

/** Run `fn` inside the object with a typed SqlHost: DurableObjectState["storage"] must satisfy it. */
function inObject<R>(name: string, fn: (host: SqlHost, state: DurableObjectState) => R | Promise<R>): Promise<R> {
  return runInDurableObject(stubFor(name), (_instance, state) => {
    const host: SqlHost = state.storage;
    return fn(host, state);
  });
}

/** Rows read and written by `fn`, from the storage's counters. */
async function cost<R>(
  storage: SqliteStorage,
  fn: () => Promise<R>,
): Promise<{ read: number; written: number; result: R }> {
  const before = { ...storage.stats };
  const result = await fn();
  return {
    read: storage.stats.rowsRead - before.rowsRead,
    written: storage.stats.rowsWritten - before.rowsWritten,
    result,
  };
}

const rewind = (conversation: Id, namespace: string): Address => ({ scope: { conversation }, namespace, rewind: true });

async function main(
  storage: SqliteStorage,
  build: (seq: (i: number) => Id) => MainWrite[],
): Promise<{ first: Id; last: Id }> {
  const first = storage.lastSeq + 1;
  return storage.commit({ kind: "main", writes: build((i) => first + i) });
}

async function newConversation(storage: SqliteStorage, parent?: { conversationId: Id; at: Id }): Promise<Id> {
  const { first } = await main(storage, (seq) => [
    { type: "createConversation", conversation: { id: seq(0), ...(parent ? { parent } : {}) } },
  ]);
  return first;
}

/** Append `count` entries to a conversation in batches of 500; every `headEvery`-th entry is a head. */
async function appendEntries(
  storage: SqliteStorage,
  conversationId: Id,
  count: number,
  headEvery = 500,
): Promise<void> {
  let done = 0;
  while (done < count) {
    const n = Math.min(500, count - done);
    await main(storage, (seq) =>
      Array.from({ length: n }, (_, i): MainWrite => {
        const id = seq(i);
        const isHead = (done + i + 1) % headEvery === 0;
        const entry: Entry = {
          id,
          conversationId,
          kind: isHead ? "summary" : i % 2 === 0 ? "user" : "assistant",
          model: [{ role: "user", content: `message ${id} `.repeat(8), timestamp: 0 }],
          ...(isHead ? { head: id } : {}),
        };
        return { type: "entry", entry };
      }),
    );
    done += n;
  }
}

/**
 * A conversation with `depth` entries of history (a head every 500), forked near the end; the fork has
 * 20 entries of its own and no head, so newestHead crosses the fork and a 50-entry page spans both.
 */
async function history(storage: SqliteStorage, depth: number): Promise<{ root: Id; fork: Id }> {
  const root = await newConversation(storage);
  await appendEntries(storage, root, depth - 20);
  const fork = await newConversation(storage, { conversationId: root, at: storage.lastSeq });
  await appendEntries(storage, fork, 20, 1000);
  return { root, fork };
}

/** A typical turn: user entry, generation task, patch of the previous task, a value, a list append, answer. */
async function turn(storage: SqliteStorage, conversationId: Id, previousTask: Id | undefined): Promise<Id> {
  const { first } = await main(storage, (seq) => [
    {
      type: "entry",
      entry: { id: seq(0), conversationId, kind: "user", model: [{ role: "user", content: "hi", timestamp: 0 }] },
    },
    {
      type: "task",
      task: { id: seq(1), conversationId, kind: "generation", role: "start", state: { status: "pending" }, after: [] },
    },
    ...(previousTask === undefined
      ? [{ type: "value.set", addr: rewind(conversationId, "turn.count"), value: 0 } as const]
      : [{ type: "patch", id: previousTask, role: "inflight", state: { status: "streaming" } } as const]),
    { type: "value.set", addr: rewind(conversationId, "plugin.plan"), value: { step: seq(3) } },
    { type: "list.append", addr: rewind(conversationId, "game.moves"), value: seq(4) },
    {
      type: "entry",
      entry: { id: seq(5), conversationId, kind: "assistant", model: [{ role: "user", content: "ok", timestamp: 0 }] },
    },
  ]);
  return first + 1;
}

describe("SqliteStorage schema (sqlite)", () => {
  it("a never-used object has no tables until open (sqlite)", async () => {
    await inObject("never-used", (host) => {
      const tables = () =>
        host.sql
          .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\'")
          .toArray();
      expect(tables()).toEqual([]);
      SqliteStorage.open(host);
      expect(tables().map((t) => t["name"])).toContain("entries");
    });
  });

  it("records the schema version, its additive mark and lastSeq in session_metadata (sqlite)", async () => {
    await inObject("version-recorded", async (host) => {
      const storage = SqliteStorage.open(host);
      const rows = host.sql.exec("SELECT name, value FROM session_metadata ORDER BY name").toArray();
      expect(rows).toEqual([
        { name: "last_seq", value: 0 },
        { name: "schema_additive", value: MIGRATIONS[SCHEMA_VERSION - 1]?.additive === true ? 1 : 0 },
        { name: "schema_version", value: SCHEMA_VERSION },
      ]);
      await newConversation(storage);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"]).toBe(1);
    });
  });

  it("refuses to open storage whose schema version is newer than the code, naming both versions (sqlite)", async () => {
    await inObject("newer-version", (host) => {
      SqliteStorage.open(host);
      host.sql.exec("UPDATE session_metadata SET value = ? WHERE name = 'schema_version'", SCHEMA_VERSION + 7);
      let error: unknown;
      try {
        SqliteStorage.open(host);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(StorageError);
      expect((error as StorageError).code).toBe("version");
      expect((error as StorageError).message).toContain(`schema version ${SCHEMA_VERSION + 7}`);
      expect((error as StorageError).message).toContain(`this code's version ${SCHEMA_VERSION}`);
    });
  });
});

describe("SqliteStorage commits (sqlite)", () => {
  it("rolls back a commit whose write throws inside the transaction: lastSeq and data unchanged (sqlite)", async () => {
    await inObject("rollback", async (host) => {
      let failOn: string | undefined;
      const faulty: SqlHost = {
        sql: {
          exec(query: string, ...bindings: SqlValue[]) {
            if (failOn !== undefined && query.includes(failOn)) throw new Error("injected failure");
            return host.sql.exec(query, ...bindings);
          },
        },
        transactionSync: (fn) => host.transactionSync(fn),
      };
      const storage = SqliteStorage.open(faulty);
      const conversationId = await newConversation(storage);
      failOn = "INSERT INTO list_elements";
      await expect(turn(storage, conversationId, undefined)).rejects.toThrow("injected failure");
      failOn = undefined;
      expect(storage.lastSeq).toBe(conversationId);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(conversationId);
      expect((await reopened.getEntries([conversationId + 1])).size).toBe(0);
      expect(await reopened.getValue(rewind(conversationId, "plugin.plan"))).toBeUndefined();
      expect(host.sql.exec("SELECT count(*) AS n FROM kinds").one()["n"]).toBe(0);
      // The failed commit consumed no ids: the next one numbers from the same place.
      const taskId = await turn(storage, conversationId, undefined);
      expect(taskId).toBe(conversationId + 2);
    });
  });

  it("rejects a 2.5 MB value with too_large and writes nothing (sqlite)", async () => {
    await inObject("too-large", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const before = { ...storage.stats };
      const batch: CommitBatch = {
        kind: "main",
        writes: [
          { type: "entry", entry: { id: conversationId + 1, conversationId, kind: "user", data: "small" } },
          { type: "value.set", addr: rewind(conversationId, "big"), value: "x".repeat(2_500_000) },
        ],
      };
      await expect(storage.commit(batch)).rejects.toMatchObject({ code: "too_large" });
      expect(storage.stats.rowsWritten).toBe(before.rowsWritten);
      expect(storage.lastSeq).toBe(conversationId);
      expect((await storage.getEntries([conversationId + 1])).size).toBe(0);
    });
  });

  it("getEntries with 250 ids chunks under the 100-parameter limit (sqlite)", async () => {
    await inObject("chunking", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      await appendEntries(storage, conversationId, 260);
      const ids = Array.from({ length: 250 }, (_, i) => conversationId + 1 + i);
      const entries = await storage.getEntries(ids);
      expect(entries.size).toBe(250);
      expect([...entries.keys()].sort((a, b) => a - b)).toEqual(ids);
      const tasks = await storage.getTasks(ids);
      expect(tasks.size).toBe(0);
      const conversations = await storage.getConversations([conversationId, ...ids]);
      expect([...conversations.keys()]).toEqual([conversationId]);
    });
  });

  it("settlement deletes the task's scratch rows in the same commit (sqlite)", async () => {
    await inObject("settle-scratch", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const taskId = await turn(storage, conversationId, undefined);
      const frames: Address = { scope: { scratch: taskId }, namespace: "frames", rewind: false };
      for (let i = 0; i < 3; i++)
        await storage.commit({
          kind: "scratch",
          task: taskId,
          writes: [{ type: "list.append", addr: frames, value: i }],
        });
      expect((await storage.readList(frames, { limit: 10 })).items.map((e) => e.value)).toEqual([0, 1, 2]);
      await main(storage, () => [{ type: "settle", id: taskId, role: "terminal", state: { status: "done" } }]);
      expect(host.sql.exec("SELECT count(*) AS n FROM scratch").one()["n"]).toBe(0);
      expect((await storage.readList(frames, { limit: 10 })).items).toEqual([]);
      expect((await storage.getTasks([taskId])).get(taskId)?.role).toBe("terminal");
    });
  });
});

describe("SqliteStorage costs (sqlite)", () => {
  it("SQLite rows read by newestHead and by a 50-entry page are the same at 1,000 and at 20,000 entries of history (sqlite)", async () => {
    const measure = (depth: number) =>
      inObject(`depth-${depth}`, async (host) => {
        const storage = SqliteStorage.open(host);
        const { root, fork } = await history(storage, depth);
        const at = storage.lastSeq;
        const head = await cost(storage, () => storage.newestHead(fork, at));
        const page = await cost(storage, () =>
          storage.scanEntries({ conversationId: fork, before: at + 1, limit: 50 }),
        );
        const forward = await cost(storage, () =>
          storage.scanEntries({ conversationId: fork, from: head.result?.head, limit: 50 }),
        );
        // The head is the root's newest one before the fork point; the page spans the fork.
        expect(head.result?.conversationId).toBe(root);
        expect(page.result.items).toHaveLength(50);
        expect(page.result.items.filter((e) => e.conversationId === fork)).toHaveLength(20);
        expect(forward.result.items).toHaveLength(50);
        return { head: head.read, page: page.read, forward: forward.read, entries: depth };
      });
    const shallow = await measure(1_000);
    const deep = await measure(20_000);
    expect(deep.head).toBe(shallow.head);
    expect(deep.page).toBe(shallow.page);
    expect(deep.forward).toBe(shallow.forward);
    // Bounded by the page and fork depth, not history.
    expect(shallow.head).toBeLessThanOrEqual(4);
    expect(shallow.page).toBeLessThanOrEqual(60);
  });

  it("rows written per typical six-write turn batch are the same at two history depths (sqlite)", async () => {
    const measure = (depth: number) =>
      inObject(`turn-${depth}`, async (host) => {
        const storage = SqliteStorage.open(host);
        const { fork } = await history(storage, depth);
        let task = await turn(storage, fork, undefined);
        task = await turn(storage, fork, task);
        const next = await cost(storage, () => turn(storage, fork, task));
        return { written: next.written, read: next.read };
      });
    const shallow = await measure(1_000);
    const deep = await measure(10_000);
    expect(deep).toEqual(shallow);
    expect(shallow.written).toBeLessThanOrEqual(30);
  });

  it("getValue at an entry through a 3-level fork chain costs rows proportional to depth, not history (sqlite)", async () => {
    const measure = (versions: number) =>
      inObject(`fork-chain-${versions}`, async (host) => {
        const storage = SqliteStorage.open(host);
        const plan = (c: Id) => rewind(c, "plugin.plan");
        const a = await newConversation(storage);
        for (let i = 0; i < versions; i += 250) {
          await main(storage, (seq) =>
            Array.from(
              { length: Math.min(250, versions - i) },
              (_, k) => ({ type: "value.set", addr: plan(a), value: seq(k) }) as const,
            ),
          );
        }
        await appendEntries(storage, a, 10);
        const forkPoint = storage.lastSeq;
        const setAt = (await storage.getValue(plan(a)))?.seq;
        // More history in A after the fork point: invisible to the forks, and must not cost anything.
        await main(storage, (seq) =>
          Array.from({ length: 100 }, (_, k) => ({ type: "value.set", addr: plan(a), value: -seq(k) }) as const),
        );
        const b = await newConversation(storage, { conversationId: a, at: forkPoint });
        await appendEntries(storage, b, 5);
        const c = await newConversation(storage, { conversationId: b, at: storage.lastSeq });
        await appendEntries(storage, c, 5);
        const d = await newConversation(storage, { conversationId: c, at: storage.lastSeq });
        await appendEntries(storage, d, 5);
        const at = storage.lastSeq;
        const deep = await cost(storage, () => storage.getValue(plan(d), at));
        const near = await cost(storage, () => storage.getValue(plan(b), forkPoint + 3));
        expect(deep.result).toEqual({ seq: setAt, value: setAt });
        expect(near.result).toEqual({ seq: setAt, value: setAt });
        return { deep: deep.read, near: near.read };
      });
    const few = await measure(10);
    const many = await measure(2_000);
    expect(many).toEqual(few);
    // Four segments walked (d, c, b, a) cost more than two (b, a), by about one indexed probe each.
    expect(few.deep).toBeGreaterThan(few.near);
    expect(few.deep).toBeLessThanOrEqual(8);
  });
  it("live-task scans read the same rows with 50 and with 2,000 finished tasks (sqlite)", async () => {
    const measure = (finished: number) =>
      inObject(`live-tasks-${finished}`, async (host) => {
        const storage = SqliteStorage.open(host);
        const conversationId = await newConversation(storage);
        const other = await newConversation(storage);
        for (let i = 0; i < finished; i += 200) {
          await main(storage, (seq) =>
            Array.from(
              { length: Math.min(200, finished - i) },
              (_, k) =>
                ({
                  type: "task",
                  task: {
                    id: seq(k),
                    conversationId: k % 2 === 0 ? conversationId : other,
                    kind: "job",
                    role: "terminal",
                    state: { status: "done" },
                    after: [],
                  },
                }) as const,
            ),
          );
        }
        const live = await main(storage, (seq) => [
          {
            type: "task",
            task: {
              id: seq(0),
              conversationId,
              kind: "generation",
              role: "start",
              state: { status: "pending" },
              after: [],
            },
          },
          {
            type: "task",
            task: {
              id: seq(1),
              conversationId: other,
              kind: "job",
              role: "inflight",
              state: { status: "running" },
              after: [],
            },
          },
        ]);
        const session = await cost(storage, () => storage.scanTasks({ live: true, limit: 100 }));
        const perConversation = await cost(storage, () =>
          storage.scanTasks({ conversationIds: [conversationId, other], live: true, limit: 100 }),
        );
        const newest = await cost(storage, () =>
          storage.scanTasks({ conversationIds: [conversationId], before: storage.lastSeq + 1, limit: 10 }),
        );
        expect(session.result.items.map((t) => t.id)).toEqual([live.first, live.last]);
        expect(perConversation.result.items.map((t) => t.id)).toEqual([live.first, live.last]);
        expect(newest.result.items).toHaveLength(10);
        expect(newest.result.items.at(-1)?.id).toBe(live.first);
        return { session: session.read, perConversation: perConversation.read, newest: newest.read };
      });
    const few = await measure(50);
    const many = await measure(2_000);
    expect(many).toEqual(few);
  });
});

describe("SqliteStorage entry tails (sqlite)", () => {
  it("scans and getEntries over entries this object committed read no rows above the tail floor and equal a fresh object's SQLite reads (sqlite)", async () => {
    await inObject("entry-tails", async (host) => {
      // A small cache: the oldest of the root's entries fall out, so the root's floor sits mid-history.
      const storage = SqliteStorage.open(host, { entryCache: 24 });
      const root = await newConversation(storage);
      const kinds = ["user", "assistant", "tool_result"] as const;
      const add = (conversationId: Id, n: number) =>
        main(storage, (seq) =>
          Array.from({ length: n }, (_, i): MainWrite => {
            const kind = kinds[seq(i) % 3] as string;
            return {
              type: "entry",
              entry: {
                id: seq(i),
                conversationId,
                kind,
                ...(kind === "tool_result" ? { key: `k${seq(i) % 2}` } : {}),
                data: { n: seq(i), nested: [1, { x: "y" }] },
              },
            };
          }),
        );
      for (let i = 0; i < 6; i++) await add(root, 5);
      const fork = await newConversation(storage, { conversationId: root, at: storage.lastSeq - 4 });
      for (let i = 0; i < 3; i++) await add(fork, 4);
      await add(root, 3);
      const at = storage.lastSeq;

      // Newest pages come from memory.
      for (const q of [
        { conversationId: fork, before: at + 1, limit: 10 },
        { conversationId: root, before: at + 1, limit: 1 },
        { conversationId: fork, kind: "tool_result", key: "k1", after: fork, limit: 3 },
      ]) {
        const read = await cost(storage, () => storage.scanEntries(q));
        expect(read.result.items.length).toBeGreaterThan(0);
        expect(read.read).toBe(0);
      }
      const newest = await cost(storage, () => storage.getEntries([at, at - 1, fork + 1]));
      expect([...newest.result.keys()]).toEqual([at, at - 1, fork + 1]);
      expect(newest.read).toBe(0);

      // Every page, forward and backward, with and without filters, across the root's floor and the fork
      // point, equals what an object with empty caches reads from SQLite.
      const fresh = SqliteStorage.open(host);
      const walk = async (s: SqliteStorage, base: Omit<EntryQuery, "limit">, limit: number, backward: boolean) => {
        const pages: Page<Entry>[] = [];
        let cursor: Id | undefined = backward ? Number.MAX_SAFE_INTEGER : undefined;
        for (;;) {
          const page = await s.scanEntries({
            ...base,
            limit,
            ...(backward ? { before: cursor } : cursor === undefined ? {} : { after: cursor }),
          });
          pages.push(page);
          if (page.next === undefined) return pages;
          cursor = page.next;
        }
      };
      for (const conversationId of [root, fork]) {
        for (const filter of [
          {},
          { kind: "user" },
          { kind: "tool_result" },
          { kind: "tool_result", key: "k0" },
          { key: "k1" },
          { kind: "none" },
        ]) {
          for (const range of [{}, { from: root + 7 }, { through: at - 6 }, { from: fork - 3, through: at - 2 }]) {
            for (const limit of [1, 4, 50]) {
              for (const backward of [false, true]) {
                const base = { conversationId, ...filter, ...range };
                expect(await walk(storage, base, limit, backward)).toEqual(await walk(fresh, base, limit, backward));
              }
            }
          }
        }
      }
      const ids = Array.from({ length: at + 2 }, (_, i) => i);
      expect([...(await storage.getEntries(ids)).entries()]).toEqual([...(await fresh.getEntries(ids)).entries()]);
    });
  });
});

describe("SqliteStorage conversation cache (sqlite)", () => {
  it("getConversations of conversations this object created reads no rows, hides tombstones, and equals a fresh object's reads (sqlite)", async () => {
    await inObject("conversation-cache", async (host) => {
      const storage = SqliteStorage.open(host);
      const root = await newConversation(storage);
      const fork = await newConversation(storage, { conversationId: root, at: root });
      const owner = await turn(storage, fork, undefined);
      const owned = await main(storage, (seq) => [
        { type: "createConversation", conversation: { id: seq(0), parent: { conversationId: fork, at: fork }, owner } },
      ]);
      const gone = await newConversation(storage);
      await main(storage, () => [{ type: "deleteConversation", id: gone }]);
      const mine = await cost(storage, () => storage.getConversations([owned.first, gone, root, fork]));
      expect(mine.read).toBe(0);
      expect([...mine.result.keys()]).toEqual([owned.first, root, fork]);
      // With an unknown id too (read from SQLite), the same map as an object with an empty cache.
      const ids = [owned.first, gone, root, 999, fork];
      expect([...(await storage.getConversations(ids)).entries()]).toEqual([
        ...(await SqliteStorage.open(host).getConversations(ids)).entries(),
      ]);
    });
  });
});

describe("SqliteStorage list caches (sqlite)", () => {
  it("settling a task this object created that never wrote scratch runs no scratch delete; one that wrote scratch, or was created before a reopen, still retires it (sqlite)", async () => {
    await inObject("scratch-retire-skip", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const settle = (id: Id) =>
        main(storage, () => [{ type: "settle", id, role: "terminal", state: { status: "done" } }]);
      const deletes = (profile: ReadonlyMap<string, { executions: number }>) =>
        profile.get("DELETE FROM scratch WHERE task = ?")?.executions ?? 0;
      const profile = storage.profile();
      const retires = () => deletes(profile);

      // Created here, no scratch: the settlement has nothing to retire and runs no DELETE.
      const clean = await turn(storage, conversationId, undefined);
      const before = retires();
      await settle(clean);
      expect(retires()).toBe(before);

      // Created here, wrote scratch (a value and a list element): retired with the settlement.
      const dirty = await turn(storage, conversationId, undefined);
      const frames: Address = { scope: { scratch: dirty }, namespace: "frames", rewind: false };
      const memo: Address = { scope: { scratch: dirty }, namespace: "memo", rewind: false };
      await storage.commit({
        kind: "scratch",
        task: dirty,
        writes: [
          { type: "list.append", addr: frames, value: 1 },
          { type: "value.set", addr: memo, value: 2 },
        ],
      });
      await settle(dirty);
      expect(retires()).toBe(before + 1);
      const fresh = SqliteStorage.open(host);
      expect((await fresh.readList(frames, { limit: 10 })).items).toEqual([]);
      expect(await fresh.getValue(memo)).toBeUndefined();

      // Created before a reopen: this object cannot know its scratch is empty, so it retires it.
      const old = await turn(fresh, conversationId, undefined);
      const oldMemo: Address = { scope: { scratch: old }, namespace: "memo", rewind: false };
      await fresh.commit({ kind: "scratch", task: old, writes: [{ type: "value.set", addr: oldMemo, value: 3 }] });
      const reopened = SqliteStorage.open(host);
      const reopenedProfile = reopened.profile();
      await reopened.commit({
        kind: "main",
        writes: [{ type: "settle", id: old, role: "terminal", state: { status: "done" } }],
      });
      expect(deletes(reopenedProfile)).toBe(1);
      expect(await SqliteStorage.open(host).getValue(oldMemo)).toBeUndefined();
    });
  });

  it("short sticky lists once read whole, and the scratch of tasks this object created, are read from memory and equal a fresh object's SQLite reads (sqlite)", async () => {
    await inObject("list-caches", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const inbox: Address = { scope: { conversation: conversationId }, namespace: "inbox", rewind: false };
      const session: Address = { scope: { session: true }, namespace: "queue", key: "q", rewind: false };
      const taskId = await turn(storage, conversationId, undefined);
      const frames: Address = { scope: { scratch: taskId }, namespace: "frames", rewind: false };
      const other: Address = { scope: { scratch: taskId }, namespace: "other", key: "k", rewind: false };
      const same = async (addr: Address, limits: readonly number[] = [1, 3, 100]) => {
        const fresh = SqliteStorage.open(host);
        for (const limit of limits) {
          for (const cursor of [
            {},
            { after: conversationId },
            { before: Number.MAX_SAFE_INTEGER },
            { before: storage.lastSeq },
          ]) {
            const q = { limit, ...cursor };
            const mine = await cost(storage, () => storage.readList(addr, q));
            expect(mine.result).toEqual(await fresh.readList(addr, q));
            expect(mine.read).toBe(0);
          }
        }
      };
      const append = (addr: Address, value: JsonValue) => main(storage, () => [{ type: "list.append", addr, value }]);

      // The scratch of a task this object created: known empty, then every write lands in memory.
      await same(frames);
      for (let i = 0; i < 3; i++)
        await storage.commit({
          kind: "scratch",
          task: taskId,
          writes: [{ type: "list.append", addr: frames, value: { i } }],
        });
      await same(frames);
      await same(other);
      const [firstFrame] = (await storage.readList(frames, { limit: 1 })).items;
      await storage.commit({
        kind: "scratch",
        task: taskId,
        writes: [{ type: "list.remove", addr: frames, element: firstFrame?.id ?? 0 }],
      });
      await same(frames);
      await storage.commit({
        kind: "scratch",
        task: taskId,
        writes: [
          { type: "list.clear", addr: frames },
          { type: "list.append", addr: frames, value: "after" },
        ],
      });
      await same(frames);

      // Sticky lists: the first whole read is SQLite's, later reads and writes stay in memory.
      for (const addr of [inbox, session]) {
        await append(addr, "a");
        await append(addr, { b: [1, 2] });
        const first = await cost(storage, () => storage.readList(addr, { limit: 10 }));
        expect(first.read).toBeGreaterThan(0);
        await same(addr);
        const [oldest] = first.result.items;
        await main(storage, () => [{ type: "list.remove", addr, element: oldest?.id ?? 0 }]);
        await append(addr, "c");
        await same(addr);
        await main(storage, () => [{ type: "list.clear", addr }]);
        await append(addr, "d");
        await same(addr);
      }

      // A list that outgrows the cache is read from SQLite again, with the same pages.
      for (let i = 0; i < 70; i++) await append(inbox, i);
      const long = await cost(storage, () => storage.readList(inbox, { limit: 100 }));
      expect(long.result.items).toHaveLength(71);
      expect(long.read).toBeGreaterThan(0);

      // Settled: the scratch is retired, and reads of it go to SQLite (no rows left).
      await main(storage, () => [{ type: "settle", id: taskId, role: "terminal", state: { status: "done" } }]);
      const retired = await storage.readList(frames, { limit: 10 });
      expect(retired.items).toEqual([]);
      expect(retired).toEqual(await SqliteStorage.open(host).readList(frames, { limit: 10 }));
    });
  });
});

describe("SqliteStorage reopen (sqlite)", () => {
  it("a new SqliteStorage over the same storage, and one after eviction, preserve lastSeq and every record (sqlite)", async () => {
    const name = "reopen";
    const snapshot = async (storage: SqliteStorage, ids: { conversations: Id[]; fork: Id; task: Id }) => ({
      lastSeq: storage.lastSeq,
      conversations: [...(await storage.getConversations(ids.conversations))],
      entries: [...(await storage.getEntries(Array.from({ length: storage.lastSeq }, (_, i) => i + 1)))],
      tasks: [...(await storage.getTasks(Array.from({ length: storage.lastSeq }, (_, i) => i + 1)))],
      transcript: (await storage.scanEntries({ conversationId: ids.fork, limit: 1000 })).items,
      plan: await storage.getValue(rewind(ids.fork, "plugin.plan")),
      moves: (await storage.readList(rewind(ids.fork, "game.moves"), { limit: 100 })).items,
      scratch: (
        await storage.readList({ scope: { scratch: ids.task }, namespace: "frames", rewind: false }, { limit: 100 })
      ).items,
      kinds: await storage.entryKinds(),
      live: (await storage.scanTasks({ live: true, limit: 100 })).items,
    });
    const ids = await inObject(name, async (host) => {
      const storage = SqliteStorage.open(host);
      const { root, fork } = await history(storage, 100);
      let task = await turn(storage, fork, undefined);
      task = await turn(storage, fork, task);
      await storage.commit({
        kind: "scratch",
        task,
        writes: [
          {
            type: "list.append",
            addr: { scope: { scratch: task }, namespace: "frames", rewind: false },
            value: "frame",
          },
        ],
      });
      const ids = { conversations: [root, fork], fork, task };
      const before = await snapshot(storage, ids);
      expect(before.scratch).toHaveLength(1);
      const again = SqliteStorage.open(host);
      expect(await snapshot(again, ids)).toEqual(before);
      return { ids, before };
    });
    await evictDurableObject(stubFor(name));
    await inObject(name, async (host) => {
      const storage = SqliteStorage.open(host);
      expect(await snapshot(storage, ids.ids)).toEqual(ids.before);
    });
  });
});

describe("SqliteStorage migration from schema version 3 (sqlite)", () => {
  it("a database written by schema version 3 opens, migrates to the current version and keeps every record (sqlite)", async () => {
    await inObject("migrate-from-v3", async (host) => {
      // Schema version 3 exactly as that code left it, and rows as it wrote them: a root conversation, a
      // user entry, a live generation with two scratch frames, a finished tool, and the boundaries.
      for (const migration of MIGRATIONS.slice(0, 3)) host.sql.exec(migration.sql);
      host.sql.exec("INSERT INTO session_metadata (name, value) VALUES ('schema_version', 3)");
      host.sql.exec(
        "INSERT INTO conversations (id, parent, parent_at, owner, deleted) VALUES (1, NULL, NULL, NULL, NULL)",
      );
      host.sql.exec("INSERT INTO kinds (id, name) VALUES (1, 'user')");
      host.sql.exec(
        `INSERT INTO entries (id, conversation, kind, key, by_task, head, data, model, edits) VALUES (2, 1, 1, NULL, NULL, NULL, NULL, '[{"role":"user","content":"hi","timestamp":0}]', NULL)`,
      );
      const task =
        "INSERT INTO tasks (id, conversation, kind, role, background, turn, abort, after, owns, state, status) VALUES (?, 1, ?, ?, 0, ?, 0, '[]', NULL, ?, ?)";
      host.sql.exec(task, 3, "generation", "inflight", 1, '{"status":"running"}', "running");
      host.sql.exec(task, 4, "tool", "terminal", 0, '{"status":"done"}', "done");
      const frame =
        "INSERT INTO scratch (task, namespace, key, keyless, element, seq, value) VALUES (3, 'frames', ?, 1, ?, ?, ?)";
      host.sql.exec(frame, new ArrayBuffer(0), 5, 5, '"f1"');
      host.sql.exec(frame, new ArrayBuffer(0), 6, 6, '"f2"');
      host.sql.exec("INSERT INTO commit_boundaries (first, last, task) VALUES (1, 4, NULL), (5, 5, 3), (6, 6, 3)");
      host.sql.exec("UPDATE session_metadata SET value = 6 WHERE name = 'last_seq'");

      const storage = SqliteStorage.open(host);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").one()["value"]).toBe(
        SCHEMA_VERSION,
      );
      expect(storage.lastSeq).toBe(6);
      expect([...(await storage.getEntries([2])).values()].map((e) => e.kind)).toEqual(["user"]);
      expect((await storage.scanTasks({ live: true, limit: 10 })).items.map((t) => t.id)).toEqual([3]);
      expect(
        (await storage.scanTasks({ conversationIds: [1], live: false, limit: 10 })).items.map((t) => t.id),
      ).toEqual([4]);
      expect((await storage.scanTasks({ conversationIds: [1], limit: 10 })).items.map((t) => t.id)).toEqual([3, 4]);
      const frames: Address = { scope: { scratch: 3 }, namespace: "frames", rewind: false };
      expect((await storage.readList(frames, { limit: 10 })).items).toEqual([
        { id: 5, value: "f1" },
        { id: 6, value: "f2" },
      ]);
      // The migrated database takes new commits: a frame, then the settlement that retires the scratch.
      await storage.commit({ kind: "scratch", task: 3, writes: [{ type: "list.append", addr: frames, value: "f3" }] });
      expect((await storage.readList(frames, { limit: 10 })).items.map((e) => e.value)).toEqual(["f1", "f2", "f3"]);
      await storage.commit({
        kind: "main",
        writes: [{ type: "settle", id: 3, role: "terminal", state: { status: "done" } }],
      });
      expect(storage.lastSeq).toBe(8);
      expect((await storage.readList(frames, { limit: 10 })).items).toEqual([]);
      expect((await storage.scanTasks({ live: true, limit: 10 })).items).toEqual([]);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(8);
      expect((await reopened.getTasks([3])).get(3)?.role).toBe("terminal");
      const tables = host.sql
        .exec("SELECT name FROM sqlite_master WHERE type = 'table'")
        .toArray()
        .map((r) => r["name"]);
      expect(tables).not.toContain("commit_boundaries");
    });
  });
});

describe("SqliteStorage migration from schema version 5 (sqlite)", () => {
  it("a database written by schema version 5 opens at its last_seq, migrates, and its next commits carry the mark in their rows (sqlite)", async () => {
    await inObject("migrate-from-v5", async (host) => {
      for (const migration of MIGRATIONS.slice(0, 5)) host.sql.exec(migration.sql);
      host.sql.exec("INSERT INTO session_metadata (name, value) VALUES ('schema_version', 5)");
      host.sql.exec(
        "INSERT INTO conversations (id, parent, parent_at, owner, deleted) VALUES (1, NULL, NULL, NULL, NULL)",
      );
      host.sql.exec("INSERT INTO kinds (id, name) VALUES (1, 'user')");
      host.sql.exec(
        `INSERT INTO entries (id, conversation, kind, key, by_task, head, data, model, edits) VALUES (2, 1, 1, NULL, NULL, NULL, NULL, '[{"role":"user","content":"hi","timestamp":0}]', NULL)`,
      );
      const task =
        "INSERT INTO tasks (id, conversation, kind, role, background, turn, abort, after, owns, state, status, settled) VALUES (?, 1, ?, ?, 0, 1, 0, '[]', NULL, ?, ?, ?)";
      host.sql.exec(task, 3, "generation", "inflight", '{"status":"running"}', "running", null);
      // Version 5 recorded last_seq on every main commit: the patch of task 3 at 4 left it there.
      host.sql.exec("UPDATE session_metadata SET value = 4 WHERE name = 'last_seq'");

      const storage = SqliteStorage.open(host);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").one()["value"]).toBe(
        SCHEMA_VERSION,
      );
      expect(storage.lastSeq).toBe(4);
      expect((await storage.getTasks([3])).get(3)?.role).toBe("inflight");
      expect([...(await storage.getEntries([2])).values()].map((e) => e.kind)).toEqual(["user"]);
      await main(storage, () => [{ type: "patch", id: 3, role: "inflight", state: { status: "streaming" } }]);
      expect(storage.lastSeq).toBe(5);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"]).toBe(4);
      expect(SqliteStorage.open(host).lastSeq).toBe(5);
      await main(storage, (seq) => [
        {
          type: "entry",
          entry: {
            id: seq(0),
            conversationId: 1,
            kind: "user",
            model: [{ role: "user", content: "again", timestamp: 0 }],
          },
        },
        { type: "settle", id: 3, role: "terminal", state: { status: "done" } },
      ]);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(7);
      expect((await reopened.scanTasks({ live: true, limit: 10 })).items).toEqual([]);
    });
  });
});

describe("SqliteStorage commit high-water mark (sqlite)", () => {
  it("a main commit that inserts an entry, task or list element or patches a live task writes no last_seq row, and every reopen recovers its sequence (sqlite)", async () => {
    await inObject("main-marks", async (host) => {
      const storage = SqliteStorage.open(host);
      const mark = (): unknown =>
        host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"];
      const reopens = (): void => expect(SqliteStorage.open(host).lastSeq).toBe(storage.lastSeq);
      const conversationId = await newConversation(storage);
      expect(mark()).toBe(conversationId); // a conversation alone carries no mark
      const session = (namespace: string): Address => ({ scope: { session: true }, namespace, rewind: false });
      // A conversation list: small session-list elements go to session_elements, which carries no mark.
      const sticky: Address = { scope: { conversation: conversationId }, namespace: "app.queue", rewind: false };
      // A task (row + tasks_live), then a sticky value after it: the task row carries the last sequence.
      const created = await cost(storage, () =>
        main(storage, (seq) => [
          {
            type: "task",
            task: {
              id: seq(0),
              conversationId,
              kind: "generation",
              role: "start",
              state: { status: "pending" },
              after: [],
            },
          },
          { type: "value.set", addr: session("app.count"), value: 1 },
        ]),
      );
      const task = created.result.first;
      expect(created.written).toBe(4); // task row and index, value row and index; no last_seq
      expect(mark()).toBe(conversationId);
      reopens();
      // A patch of the live task: one row written, the task carries the mark.
      const patched = await cost(storage, () =>
        main(storage, () => [{ type: "patch", id: task, role: "inflight", state: { status: "streaming" } }]),
      );
      expect(patched.written).toBe(1);
      reopens();
      // An entry followed by a value update, then a list append followed by one.
      await main(storage, (seq) => [
        {
          type: "entry",
          entry: { id: seq(0), conversationId, kind: "user", model: [{ role: "user", content: "hi", timestamp: 0 }] },
        },
        { type: "value.set", addr: session("app.count"), value: 2 },
      ]);
      reopens();
      const appended = await main(storage, () => [
        { type: "list.append", addr: sticky, value: "job" },
        { type: "value.set", addr: session("app.count"), value: 3 },
      ]);
      reopens();
      expect(mark()).toBe(conversationId);
      // Removing that element deletes the row that carried the mark: this commit records last_seq.
      await main(storage, () => [{ type: "list.remove", addr: sticky, element: appended.first }]);
      expect(mark()).toBe(storage.lastSeq);
      reopens();
      // A patch followed by the settlement of the same task leaves no live row carrying it: last_seq.
      await main(storage, () => [
        { type: "patch", id: task, role: "inflight", state: { status: "tools" } },
        { type: "settle", id: task, role: "terminal", state: { status: "done" } },
      ]);
      expect(mark()).toBe(storage.lastSeq);
      reopens();
      // A value set alone records last_seq.
      await main(storage, () => [{ type: "value.set", addr: session("app.count"), value: 4 }]);
      expect(mark()).toBe(storage.lastSeq);
      reopens();
      const reopened = SqliteStorage.open(host);
      expect(
        (await main(reopened, (seq) => [{ type: "value.set", addr: session("app.count"), value: seq(0) }])).first,
      ).toBe(storage.lastSeq + 1);
    });
  });

  it("a scratch append commit writes only its scratch row, and reopen recovers its sequence; a clear records the mark (sqlite)", async () => {
    await inObject("scratch-mark", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversation = (
        await main(storage, (seq) => [{ type: "createConversation", conversation: { id: seq(0) } }])
      ).first;
      const task = (
        await main(storage, (seq) => [
          {
            type: "task",
            task: {
              id: seq(0),
              conversationId: conversation,
              kind: "generation",
              role: "inflight",
              state: { status: "running" },
              after: [],
            },
          },
        ])
      ).first;
      const frames: Address = { scope: { scratch: task }, namespace: "frames", rewind: false };
      const append = await cost(storage, () =>
        storage.commit({ kind: "scratch", task, writes: [{ type: "list.append", addr: frames, value: "f1" }] }),
      );
      expect(append.written).toBe(1);
      expect(SqliteStorage.open(host).lastSeq).toBe(append.result.last);
      await storage.commit({ kind: "scratch", task, writes: [{ type: "list.clear", addr: frames }] });
      const cleared = storage.lastSeq;
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"]).toBe(cleared);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(cleared);
      expect(
        (await reopened.commit({ kind: "scratch", task, writes: [{ type: "list.append", addr: frames, value: "f2" }] }))
          .first,
      ).toBe(cleared + 1);
    });
  });
});

describe("SqliteStorage same-commit elision (sqlite)", () => {
  it("an idle accept's same-commit sticky append and remove write no list row, its inputResult is written once, and reopen recovers its sequence (sqlite)", async () => {
    await inObject("elide-accept", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const inbox: Address = { scope: { conversation: conversationId }, namespace: "pi.inbox", rewind: false };
      const result = (inputId: Id): Address => ({
        scope: { conversation: conversationId },
        namespace: "pi.inputResult",
        key: String(inputId),
        rewind: false,
      });
      // Warm the entries' kind row so both accepts cost the same.
      await main(storage, (seq) => [
        {
          type: "entry",
          entry: { id: seq(0), conversationId, kind: "user", model: [{ role: "user", content: "warm", timestamp: 0 }] },
        },
      ]);
      const accept = (): Promise<{ read: number; written: number; result: { first: Id; last: Id } }> =>
        cost(storage, () =>
          main(storage, (seq): MainWrite[] => [
            { type: "list.append", addr: inbox, value: { mode: "followUp", input: "hi" } },
            { type: "value.set", addr: result(seq(0)), value: { status: "queued" } },
            {
              type: "entry",
              entry: {
                id: seq(2),
                conversationId,
                kind: "user",
                model: [{ role: "user", content: "hi", timestamp: 0 }],
              },
            },
            { type: "list.remove", addr: inbox, element: seq(0) },
            { type: "value.set", addr: result(seq(0)), value: { status: "placed", entry: seq(2) } },
          ]),
        );
      const accepted = await accept();
      // The entry (row, entries_by_conversation, entries_by_kind) and the inputResult (row, index), once.
      expect(accepted.written).toBe(5);
      const inputId = accepted.result.first;
      expect((await storage.readList(inbox, { limit: 10 })).items).toEqual([]);
      expect(await storage.getValue(result(inputId))).toEqual({
        seq: inputId + 4,
        value: { status: "placed", entry: inputId + 2 },
      });
      expect(host.sql.exec("SELECT count(*) AS n FROM list_elements").one()["n"]).toBe(0);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(accepted.result.last);
      expect(await reopened.getValue(result(inputId))).toEqual({
        seq: inputId + 4,
        value: { status: "placed", entry: inputId + 2 },
      });
      // A commit whose only writes are an append and its removal leaves no row: it records last_seq.
      const alone = await main(storage, () => [
        { type: "list.append", addr: inbox, value: { mode: "followUp", input: "gone" } },
        { type: "list.remove", addr: inbox, element: storage.lastSeq + 1 },
      ]);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"]).toBe(
        alone.last,
      );
      expect(SqliteStorage.open(host).lastSeq).toBe(alone.last);
      // An append a later clear discards is not written; earlier elements are still cleared.
      const kept = (
        await main(storage, () => [{ type: "list.append", addr: inbox, value: { mode: "nextRun", input: "kept" } }])
      ).first;
      expect((await storage.readList(inbox, { limit: 10 })).items.map((e) => e.id)).toEqual([kept]);
      const cleared = await cost(storage, () =>
        main(storage, () => [
          { type: "list.append", addr: inbox, value: { mode: "followUp", input: "cleared" } },
          { type: "list.clear", addr: inbox },
        ]),
      );
      expect(cleared.written).toBe(2); // the clear's deletion of `kept` and last_seq; no row for the discarded append
      expect((await storage.readList(inbox, { limit: 10 })).items).toEqual([]);
      expect(SqliteStorage.open(host).lastSeq).toBe(cleared.result.last);
    });
  });

  it("rewindable appends removed in the same commit keep their rows and markers, and a rewindable value set twice keeps both versions (sqlite)", async () => {
    await inObject("elide-rewindable", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const moves = rewind(conversationId, "game.moves");
      const plan = rewind(conversationId, "plugin.plan");
      const { first } = await main(storage, (seq) => [
        { type: "list.append", addr: moves, value: "a" },
        { type: "value.set", addr: plan, value: 1 },
        {
          type: "entry",
          entry: { id: seq(2), conversationId, kind: "user", model: [{ role: "user", content: "hi", timestamp: 0 }] },
        },
        { type: "list.remove", addr: moves, element: seq(0) },
        { type: "value.set", addr: plan, value: 2 },
      ]);
      expect((await storage.readList(moves, { limit: 10 })).items).toEqual([]);
      expect((await storage.readList(moves, { limit: 10, at: first + 2 })).items.map((e) => e.value)).toEqual(["a"]);
      expect((await storage.getValue(plan, first + 2))?.value).toBe(1);
      expect((await storage.getValue(plan))?.value).toBe(2);
    });
  });
});

describe("SqliteStorage compact session-list elements (sqlite)", () => {
  const usageRow = (taskId: Id) => ({
    conversationId: 1,
    taskId,
    kind: "generation",
    model: "faux/faux-model",
    usage: {
      input: 120,
      output: 80,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 200,
      cost: { input: 0.0001, output: 0.0002, cacheRead: 0, cacheWrite: 0, total: 0.0003 },
    },
  });

  it("a pi.usage row costs one written row, large session elements and conversation lists keep row and index, and reads merge both tables in id order (sqlite)", async () => {
    await inObject("compact-session-list", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const usage: Address = { scope: { session: true }, namespace: "pi.usage", rewind: false };
      const inbox: Address = { scope: { conversation: conversationId }, namespace: "pi.inbox", rewind: false };
      const entry = (seq: Id): MainWrite => ({
        type: "entry",
        entry: { id: seq, conversationId, kind: "assistant", model: [{ role: "user", content: "ok", timestamp: 0 }] },
      });
      await main(storage, (seq) => [entry(seq(0))]);
      // An entry carries the commit mark; the usage row beside it is one row (no list_elements index).
      const small = await cost(storage, () =>
        main(storage, (seq) => [entry(seq(0)), { type: "list.append", addr: usage, value: usageRow(seq(0)) }]),
      );
      expect(small.written).toBe(3 + 1);
      const big = await cost(storage, () =>
        main(storage, (seq) => [
          entry(seq(0)),
          { type: "list.append", addr: usage, value: { note: "x".repeat(2_000), taskId: seq(0) } },
        ]),
      );
      expect(big.written).toBe(3 + 2);
      const queued = await cost(storage, () =>
        main(storage, (seq) => [
          entry(seq(0)),
          { type: "list.append", addr: inbox, value: { mode: "followUp", input: "hi" } },
        ]),
      );
      expect(queued.written).toBe(3 + 2);
      const third = await main(storage, (seq) => [{ type: "list.append", addr: usage, value: usageRow(seq(0)) }]);
      const ids = [small.result.last, big.result.last, third.first];
      const all = await storage.readList(usage, { limit: 10 });
      expect(all.items.map((e) => e.id)).toEqual(ids);
      expect(all.items[0]?.value).toEqual(usageRow(small.result.first));
      // Paging crosses the tables in both directions.
      const first = await storage.readList(usage, { limit: 2 });
      expect(first.items.map((e) => e.id)).toEqual(ids.slice(0, 2));
      expect((await storage.readList(usage, { after: first.next as Id, limit: 2 })).items.map((e) => e.id)).toEqual(
        ids.slice(2),
      );
      expect(
        (await storage.readList(usage, { before: Number.MAX_SAFE_INTEGER, limit: 2 })).items.map((e) => e.id),
      ).toEqual(ids.slice(1));
      // The last commit wrote only a compact row: its mark is last_seq, and reopen recovers it.
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'last_seq'").one()["value"]).toBe(
        third.last,
      );
      expect(SqliteStorage.open(host).lastSeq).toBe(third.last);
      // Remove finds an element in either table; clear empties both.
      await main(storage, () => [{ type: "list.remove", addr: usage, element: ids[0] as Id }]);
      await main(storage, () => [{ type: "list.remove", addr: usage, element: ids[1] as Id }]);
      expect((await storage.readList(usage, { limit: 10 })).items.map((e) => e.id)).toEqual(ids.slice(2));
      await main(storage, (seq) => [
        { type: "list.append", addr: usage, value: { note: "y".repeat(2_000), taskId: seq(0) } },
        { type: "list.clear", addr: usage },
      ]);
      expect((await storage.readList(usage, { limit: 10 })).items).toEqual([]);
      expect(SqliteStorage.open(host).lastSeq).toBe(storage.lastSeq);
    });
  });
});

describe("SqliteStorage migration from schema version 6 (sqlite)", () => {
  it("a database written by schema version 6 keeps its session-list elements readable and removable beside new compact ones (sqlite)", async () => {
    await inObject("migrate-from-v6", async (host) => {
      for (const migration of MIGRATIONS.slice(0, 6)) host.sql.exec(migration.sql);
      host.sql.exec("INSERT INTO session_metadata (name, value) VALUES ('schema_version', 6)");
      const usageKey = new Uint8Array(0).buffer;
      const old =
        "INSERT INTO list_elements (id, scope, namespace, key, keyless, rewind, value, last) VALUES (?, 0, 'pi.usage', ?, 1, 0, ?, ?)";
      host.sql.exec(old, 1, usageKey, '{"taskId":1}', null);
      host.sql.exec(old, 2, usageKey, '{"taskId":2}', 3);
      const storage = SqliteStorage.open(host);
      expect(host.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").one()["value"]).toBe(
        SCHEMA_VERSION,
      );
      expect(storage.lastSeq).toBe(3);
      const usage: Address = { scope: { session: true }, namespace: "pi.usage", rewind: false };
      const added = await cost(storage, () =>
        main(storage, () => [{ type: "list.append", addr: usage, value: { taskId: 4 } }]),
      );
      expect(added.result.first).toBe(4);
      expect(added.written).toBe(2); // the compact row and last_seq
      expect(host.sql.exec("SELECT count(*) AS n FROM session_elements").one()["n"]).toBe(1);
      expect((await storage.readList(usage, { limit: 10 })).items).toEqual([
        { id: 1, value: { taskId: 1 } },
        { id: 2, value: { taskId: 2 } },
        { id: 4, value: { taskId: 4 } },
      ]);
      await main(storage, () => [{ type: "list.remove", addr: usage, element: 2 }]);
      const reopened = SqliteStorage.open(host);
      expect(reopened.lastSeq).toBe(5);
      expect((await reopened.readList(usage, { limit: 10 })).items.map((e) => e.id)).toEqual([1, 4]);
    });
  });
});

describe("SqliteStorage compact model and task state columns (sqlite)", () => {
  /** An assistant message as pi-ai produces it: usage in pi-ai's key order, totals equal to their sums. */
  const assistant = (
    input: number,
    output: number,
    cost: { input: number; output: number } = { input: 0, output: 0 },
  ) => ({
    role: "assistant",
    content: [{ type: "text", text: "ok" }],
    api: "faux",
    provider: "faux",
    model: "faux-model",
    usage: {
      input,
      output,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: input + output,
      cost: {
        input: cost.input,
        output: cost.output,
        cacheRead: 0,
        cacheWrite: 0,
        total: cost.input + cost.output + 0 + 0,
      },
    },
    stopReason: "stop",
    timestamp: 17,
  });
  const modelText = (host: SqlHost, id: Id): string =>
    host.sql.exec("SELECT model FROM entries WHERE id = ?", id).one()["model"] as string;
  const taskRow = (host: SqlHost, id: Id) => host.sql.exec("SELECT state, status FROM tasks WHERE id = ?", id).one();

  it("an assistant entry's stored model has no zero usage fields and reads back deep-equal and JSON-identical, from the cache and after reopen (sqlite)", async () => {
    await inObject("compact-model", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const model = [
        { role: "user", content: "hi", timestamp: 1 },
        assistant(43_867, 7),
        assistant(120, 80, { input: 0.0001, output: 0.0002 }),
      ];
      const { first } = await main(storage, (seq) => [
        { type: "entry", entry: { id: seq(0), conversationId, kind: "assistant", model: model as never } },
      ]);
      const stored = modelText(host, first);
      expect(stored).not.toContain("cacheRead");
      expect(stored).not.toContain("totalTokens");
      expect(stored.length).toBeLessThan(JSON.stringify(model).length - 250);
      for (const reader of [storage, SqliteStorage.open(host)]) {
        const entry = (await reader.getEntries([first])).get(first);
        expect(entry?.model).toEqual(model);
        expect(JSON.stringify(entry?.model)).toBe(JSON.stringify(model));
        const scanned = (await reader.scanEntries({ conversationId, limit: 10 })).items[0];
        expect(JSON.stringify(scanned?.model)).toBe(JSON.stringify(model));
      }
    });
  });

  it("a task row's state column has no status (first or last key) and reads back with it in place through create, patch, settle, scans and reopen (sqlite)", async () => {
    await inObject("compact-task-state", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const { first: task } = await main(storage, (seq) => [
        {
          type: "task",
          task: {
            id: seq(0),
            conversationId,
            kind: "generation",
            role: "start",
            state: { status: "pending", attempt: 1 },
            after: [],
          },
        },
      ]);
      expect(taskRow(host, task)).toEqual({ state: '{"attempt":1}', status: "pending" });
      await main(storage, () => [{ type: "patch", id: task, role: "inflight", state: { status: "streaming" } }]);
      expect(taskRow(host, task)).toEqual({ state: "{}", status: "streaming" });
      const live = async (reader: SqliteStorage) =>
        (await reader.scanTasks({ live: true, limit: 10 })).items.map((t) => t.state);
      expect(await live(storage)).toEqual([{ status: "streaming" }]);
      expect(await live(SqliteStorage.open(host))).toEqual([{ status: "streaming" }]);
      await main(storage, () => [
        { type: "settle", id: task, role: "terminal", state: { output: { text: "ok" }, status: "done" } },
      ]);
      expect(taskRow(host, task)).toEqual({ state: '~{"output":{"text":"ok"}}', status: "done" });
      for (const reader of [storage, SqliteStorage.open(host)]) {
        const state = (await reader.getTasks([task])).get(task)?.state;
        expect(JSON.stringify(state)).toBe('{"output":{"text":"ok"},"status":"done"}');
        expect(
          (await reader.scanTasks({ conversationIds: [conversationId], live: false, limit: 10 })).items.map(
            (t) => t.state,
          ),
        ).toEqual([state]);
      }
    });
  });

  it("rows in the old shape, and usages or states that cannot be restored exactly, are stored and read as they are (sqlite)", async () => {
    await inObject("compact-old-shapes", async (host) => {
      const storage = SqliteStorage.open(host);
      const conversationId = await newConversation(storage);
      const reasoning = { ...assistant(10, 5), usage: { ...assistant(10, 5).usage, reasoning: 0 } };
      const reordered = {
        ...assistant(10, 5),
        usage: {
          output: 5,
          input: 10,
          cacheRead: 0,
          cacheWrite: 0,
          totalTokens: 15,
          cost: assistant(10, 5).usage.cost,
        },
      };
      const notSum = { ...assistant(10, 5), usage: { ...assistant(10, 5).usage, totalTokens: 16 } };
      const arrayUsage = { ...assistant(10, 5), usage: [1, 2] };
      const keep = [[reasoning], [reordered], [notSum], [arrayUsage, assistant(1, 1)]];
      const { first } = await main(storage, (seq) => [
        ...keep.map((model, i): MainWrite => ({
          type: "entry",
          entry: { id: seq(i), conversationId, kind: "assistant", model: model as never },
        })),
        {
          type: "task",
          task: {
            id: seq(4),
            conversationId,
            kind: "generation",
            role: "start",
            state: { attempt: 1, status: "pending", last: "status" },
            after: [],
          },
        },
        // A status the UTF-8 column cannot hold (a lone surrogate) stays in the JSON, first or last.
        {
          type: "task",
          task: {
            id: seq(5),
            conversationId,
            kind: "job",
            role: "start",
            state: { status: "\uD800", n: 1 },
            after: [],
          },
        },
        {
          type: "task",
          task: {
            id: seq(6),
            conversationId,
            kind: "job",
            role: "start",
            state: { n: 1, status: "x\uDC00" },
            after: [],
          },
        },
      ]);
      keep.forEach((model, i) => expect(modelText(host, first + i)).toBe(JSON.stringify(model)));
      expect(taskRow(host, first + 4)).toEqual({
        state: '{"attempt":1,"status":"pending","last":"status"}',
        status: "pending",
      });
      expect(taskRow(host, first + 5)["state"]).toBe('{"status":"\\ud800","n":1}');
      expect(taskRow(host, first + 6)["state"]).toBe('{"n":1,"status":"x\\udc00"}');
      // Rows written before the compact shapes (usage whole, status inside state) read unchanged.
      const old = [assistant(3, 4)];
      const { first: oldEntry } = await main(storage, (seq) => [
        {
          type: "entry",
          entry: {
            id: seq(0),
            conversationId,
            kind: "assistant",
            model: [{ role: "user", content: "x", timestamp: 0 }],
          },
        },
      ]);
      host.sql.exec("UPDATE entries SET model = ? WHERE id = ?", JSON.stringify(old), oldEntry);
      host.sql.exec("UPDATE tasks SET state = ? WHERE id = ?", '{"status":"pending","attempt":2}', first + 4);
      const reopened = SqliteStorage.open(host);
      const entries = await reopened.getEntries([...keep.map((_, i) => first + i), oldEntry]);
      expect([...entries.values()].map((e) => JSON.stringify(e.model))).toEqual(
        [...keep, old].map((m) => JSON.stringify(m)),
      );
      expect(JSON.stringify((await reopened.getTasks([first + 4])).get(first + 4)?.state)).toBe(
        '{"status":"pending","attempt":2}',
      );
    });
  });
});
