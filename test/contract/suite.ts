/**
 * The storage contract suite (§10.1, parts of §10.2): every `Storage` backend runs these cases, in the
 * style of Hono's shared router cases; a backend joins by one `storageContract(factory)` line in a
 * contract.test.ts. Every test name ends with the backend's name in parentheses.
 *
 * Two kinds of evidence: explicit cases assert stated values (deep forks, tombstones, clears, heads,
 * paging, rejection), and every case also compares a complete dump (compare.ts) of the backend with the
 * memory backend replaying the same committed batches (the reference) and with `ModelStorage`, a naive
 * independent model (model.ts), so a bug the memory backend shares cannot hide. Durable backends repeat
 * the checks after a clean close+reopen and after a crash+reopen.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CommitBatch, Entry, Id, JsonValue, MainWrite, TaskStateBase } from "../../src/storage/records.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { MAX_PAYLOAD_BYTES } from "../../src/storage/shared.js";
import { StorageError, type Storage, type StorageErrorCode } from "../../src/storage/storage.js";
import type { BackendHarness, HarnessFactory } from "./backends.js";
import { MainBuilder, ScratchBuilder } from "./builder.js";
import { diffDumps, readDump, type Dump } from "./compare.js";
import { ModelStorage } from "./model.js";
import { generateStream, type GeneratedBatch } from "./mutations.js";
import {
  conversationList,
  conversationValue,
  scratchList,
  scratchValue,
  sessionList,
  sessionValue,
} from "./vocabulary.js";

const MAX = Number.MAX_SAFE_INTEGER;

/** The one long stream of §10.1 and the randomized small histories; fixed so failures reproduce. */
export const MAIN_STREAM = { seed: 1001, batches: 90 } as const;
export const RANDOM_SEEDS: readonly number[] = Array.from({ length: 20 }, (_, i) => 7919 * (i + 1));
export const RANDOM_BATCHES = 40;

/**
 * Which reads are compared with the model: all but those whose result the contract leaves open (entries
 * of a deleted conversation read by id), which are still compared with the memory reference.
 */
const MODEL_COMPARED = (label: string): boolean => !label.startsWith("getEntries (entries of deleted conversations)");

// ---------------------------------------------------------------------------------------------
// References, cached per module: every backend of a test file compares with the same dumps.

const referenceCache = new Map<string, Promise<{ memory: Dump; model: Dump }>>();

async function replayInto(storage: Storage, batches: readonly CommitBatch[]): Promise<void> {
  for (const batch of batches) await storage.commit(batch);
}

/** Dumps of the memory reference and of the model after `batches` (with the next-sequence probe if asked). */
function references(
  batches: readonly CommitBatch[],
  probeNext: boolean,
  cacheKey?: string,
): Promise<{ memory: Dump; model: Dump }> {
  const build = async () => {
    const memory = new MemoryStorage();
    const model = new ModelStorage();
    await replayInto(memory, batches);
    await replayInto(model, batches);
    return { memory: await readDump(memory, { probeNext }), model: await readDump(model, { probeNext }) };
  };
  if (cacheKey === undefined) return build();
  const key = `${cacheKey}:${probeNext}`;
  let cached = referenceCache.get(key);
  if (cached === undefined) {
    cached = build();
    referenceCache.set(key, cached);
  }
  return cached;
}

function expectSameDump(expected: Dump, actual: Dump, what: string, only?: (label: string) => boolean): void {
  const diffs = diffDumps(expected, actual, only === undefined ? {} : { only });
  expect(diffs.length === 0 ? "" : `${what}: reads differ\n${diffs.join("\n")}`).toBe("");
}

/** Await a rejection and return its StorageError code (fails the test on success or a foreign error). */
async function rejection(promise: Promise<unknown>): Promise<StorageErrorCode> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StorageError) return error.code;
    throw error;
  }
  throw new Error("expected a StorageError rejection, but the call succeeded");
}

const user = (text: string) => ({ model: [{ role: "user" as const, content: text, timestamp: 0 }] });
const rewindValue = (c: Id, ns = "plan") => conversationValue(c, ns, undefined, true);
const rewindList = (c: Id, ns = "moves") => conversationList(c, ns, undefined, true);
const ids = (items: readonly { id: Id }[]) => items.map((i) => i.id);

export function storageContract(factory: HarnessFactory): void {
  const probe = factory();
  const backend = probe.name;
  const durable = probe.reopen !== undefined && probe.crash !== undefined;
  const t = (title: string): string => `${title} (${backend})`;

  describe(`storage contract (${backend})`, () => {
    let harness: BackendHarness;
    let s: Storage;
    /** Every batch committed successfully in this test, for the reference replay. */
    let log: CommitBatch[];

    beforeEach(async () => {
      harness = factory();
      s = await harness.open();
      log = [];
    });

    afterEach(async () => {
      await s.close().catch(() => undefined);
      await harness.dispose?.();
    });

    // -------------------------------------------------------------------------------------------
    // Helpers bound to the test's storage

    const main = async <T>(build: (tx: MainBuilder) => T): Promise<T> => {
      const tx = new MainBuilder(s.lastSeq);
      const out = build(tx);
      const batch = tx.batch();
      expect(await s.commit(batch)).toEqual({ first: tx.lastSeq + 1, last: tx.nextSeq - 1 });
      expect(s.lastSeq).toBe(tx.nextSeq - 1);
      log.push(batch);
      return out;
    };

    const scratch = async <T>(task: Id, build: (tx: ScratchBuilder) => T): Promise<T> => {
      const tx = new ScratchBuilder(s.lastSeq, task);
      const out = build(tx);
      const batch = tx.batch();
      expect(await s.commit(batch)).toEqual({ first: tx.lastSeq + 1, last: tx.nextSeq - 1 });
      log.push(batch);
      return out;
    };

    /** Replay generated batches, checking every returned range. */
    const replay = async (stream: readonly GeneratedBatch[]): Promise<void> => {
      for (const [i, { batch, first, last }] of stream.entries()) {
        const range = await s.commit(batch);
        if (range.first !== first || range.last !== last || s.lastSeq !== last) {
          throw new Error(
            `batch ${i}: commit returned ${JSON.stringify(range)}, lastSeq ${s.lastSeq}; expected ${first}..${last}`,
          );
        }
        log.push(batch);
      }
    };

    const reopen = async (how: "close" | "crash"): Promise<void> => {
      if (how === "close" && harness.reopen !== undefined) s = await harness.reopen();
      if (how === "crash" && harness.crash !== undefined) s = await harness.crash();
    };

    /** The storage's complete dump, read inside the backend when the harness can (one round trip). */
    const dump = (options: { probeNext?: boolean } = {}): Promise<Dump> =>
      harness.inside === undefined ? readDump(s, options) : harness.inside((storage) => readDump(storage, options));

    /** Compare the storage with the memory reference and the model replaying this test's log. */
    const matchesReferences = async (
      what: string,
      options: { probeNext?: boolean; cacheKey?: string } = {},
    ): Promise<void> => {
      const probeNext = options.probeNext ?? false;
      const refs = await references(log, probeNext, options.cacheKey);
      const actual = await dump({ probeNext });
      expectSameDump(refs.memory, actual, `${what}, against the memory reference`);
      expectSameDump(refs.model, actual, `${what}, against the model`, MODEL_COMPARED);
    };

    /** Run `check` now and, on durable backends, again after close+reopen and after crash+reopen. */
    const durably = async (check: () => Promise<void>): Promise<void> => {
      await check();
      if (!durable) return;
      await reopen("close");
      await check();
      await reopen("crash");
      await check();
    };

    // -------------------------------------------------------------------------------------------
    // §10.1: one validated stream, compared on everything, live and across reopen/crash

    describe("§10.1 replayed mutation stream", () => {
      const stream = generateStream(MAIN_STREAM.seed, MAIN_STREAM);
      const third = Math.floor(stream.length / 3);

      it(
        t(
          `§10.1 a validated stream (seed ${MAIN_STREAM.seed}) matches the memory reference and the model at every third`,
        ),
        async () => {
          for (const k of [third, 2 * third, stream.length]) {
            await replay(stream.slice(log.length, k));
            await matchesReferences(`after ${k} batches`, { cacheKey: `main:${k}`, probeNext: k === stream.length });
          }
        },
      );

      if (durable) {
        it(
          t(`§10.1 a validated stream (seed ${MAIN_STREAM.seed}) survives close+reopen mid-stream and at the end`),
          async () => {
            await replay(stream.slice(0, third));
            await reopen("close");
            await matchesReferences(`reopened after ${third} batches`, { cacheKey: `main:${third}` });
            await replay(stream.slice(third));
            await reopen("close");
            await matchesReferences(`reopened at the end`, { cacheKey: `main:${stream.length}`, probeNext: true });
          },
        );

        it(
          t(`§10.1 a validated stream (seed ${MAIN_STREAM.seed}) survives crash+reopen mid-stream and at the end`),
          async () => {
            await replay(stream.slice(0, 2 * third));
            await reopen("crash");
            await matchesReferences(`crashed after ${2 * third} batches`, { cacheKey: `main:${2 * third}` });
            await replay(stream.slice(2 * third));
            await reopen("crash");
            await matchesReferences(`crashed at the end`, { cacheKey: `main:${stream.length}`, probeNext: true });
          },
        );
      }
    });

    describe("§10.1 randomized small histories", () => {
      for (const seed of RANDOM_SEEDS) {
        it(t(`§10.1 randomized history seed=${seed} matches the memory reference and the model`), async () => {
          const stream = generateStream(seed, { batches: RANDOM_BATCHES });
          // Durable backends reopen at a seeded point, by close or by crash, then continue the stream.
          const cut = durable ? 5 + (seed % (RANDOM_BATCHES - 10)) : stream.length;
          await replay(stream.slice(0, cut));
          await reopen(seed % 2 === 0 ? "close" : "crash");
          await replay(stream.slice(cut));
          await matchesReferences(`seed ${seed}`, { cacheKey: `seed:${seed}`, probeNext: true });
        });
      }
    });

    // -------------------------------------------------------------------------------------------
    // §10.1: explicit deep-fork cases

    describe("§10.1 deep forks", () => {
      it(t("§10.1 forks before and after a value delete see the value, then its tombstone"), async () => {
        const a = await main((tx) => tx.conversation());
        const e1 = await main((tx) => {
          tx.set(rewindValue(a), "on");
          return tx.entry(a, "user", user("1"));
        });
        const set1 = e1 - 1;
        const e2 = await main((tx) => {
          tx.delete(rewindValue(a));
          return tx.entry(a, "assistant");
        });
        const e3 = await main((tx) => {
          tx.set(rewindValue(a), "again");
          return tx.entry(a, "user");
        });
        const before = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e1 } }));
        const after = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e2 } }));
        // The fork before the delete writes its own tombstone; a fork of it past that tombstone must not
        // look through it to the source's older value.
        const ownDelete = await main((tx) => {
          tx.delete(rewindValue(before));
          return tx.entry(before, "user");
        });
        const grandchild = await main((tx) => tx.conversation({ parent: { conversationId: before, at: ownDelete } }));
        const grandchildEarly = await main((tx) => tx.conversation({ parent: { conversationId: before, at: e1 } }));

        await durably(async () => {
          expect(await s.getValue(rewindValue(a))).toEqual({ seq: e3 - 1, value: "again" });
          expect(await s.getValue(rewindValue(a), 0)).toBeUndefined();
          expect(await s.getValue(rewindValue(a), e1)).toEqual({ seq: set1, value: "on" });
          expect(await s.getValue(rewindValue(a), e2)).toBeUndefined();
          expect(await s.getValue(rewindValue(a), e3)).toEqual({ seq: e3 - 1, value: "again" });
          expect(await s.getValue(rewindValue(after))).toBeUndefined();
          expect(await s.getValue(rewindValue(after), e1)).toEqual({ seq: set1, value: "on" });
          expect(await s.getValue(rewindValue(before))).toBeUndefined();
          expect(await s.getValue(rewindValue(before), e1)).toEqual({ seq: set1, value: "on" });
          expect(await s.getValue(rewindValue(grandchild))).toBeUndefined();
          expect(await s.getValue(rewindValue(grandchildEarly))).toEqual({ seq: set1, value: "on" });
          // scanValues lists a conversation's own current values only: tombstones and inherited ones are absent.
          expect((await s.scanValues({ scope: { conversation: a }, namespace: "plan", limit: 10 })).items).toEqual([
            { key: "", version: { seq: e3 - 1, value: "again" } },
          ]);
          expect((await s.scanValues({ scope: { conversation: before }, namespace: "plan", limit: 10 })).items).toEqual(
            [],
          );
          expect((await s.scanValues({ scope: { conversation: after }, namespace: "plan", limit: 10 })).items).toEqual(
            [],
          );
        });
        await matchesReferences("after the value-delete forks");
      });

      it(
        t("§10.1 forks before and after a list clear see the elements, then none; clears hide, never erase"),
        async () => {
          const a = await main((tx) => tx.conversation());
          // §4.2: appended at 40 and 50, cleared at 60, appended at 70 reads [A, B] at 55, [] at 65, [C] at 75.
          const [xA, e1] = await main((tx) => [tx.append(rewindList(a), "A"), tx.entry(a, "user")] as const);
          const [xB, e2] = await main((tx) => [tx.append(rewindList(a), "B"), tx.entry(a, "user")] as const);
          const e3 = await main((tx) => {
            tx.clear(rewindList(a));
            return tx.entry(a, "user");
          });
          const [xC, e4] = await main((tx) => [tx.append(rewindList(a), "C"), tx.entry(a, "user")] as const);
          const f1 = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e2 } }));
          const f2 = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e3 } }));
          const f3 = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e4 } }));
          // The fork before the clear appends its own element, removes an inherited one, then clears.
          const [xD, f1e1] = await main((tx) => [tx.append(rewindList(f1), "D"), tx.entry(f1, "user")] as const);
          const f1e2 = await main((tx) => {
            tx.remove(rewindList(f1), xA);
            return tx.entry(f1, "user");
          });
          const f1e3 = await main((tx) => {
            tx.clear(rewindList(f1));
            return tx.entry(f1, "user");
          });
          const f1child = await main((tx) => tx.conversation({ parent: { conversationId: f1, at: f1e1 } }));
          // The source removes after the fork: the later fork keeps C.
          await main((tx) => tx.remove(rewindList(a), xC));

          const read = async (c: Id, at?: Id) =>
            (await s.readList(rewindList(c), at === undefined ? { limit: 100 } : { at, limit: 100 })).items;
          await durably(async () => {
            expect(await read(a, e1)).toEqual([{ id: xA, value: "A" }]);
            expect(await read(a, e2)).toEqual([
              { id: xA, value: "A" },
              { id: xB, value: "B" },
            ]);
            expect(await read(a, e3)).toEqual([]);
            expect(await read(a, e4)).toEqual([{ id: xC, value: "C" }]);
            expect(await read(a)).toEqual([]);
            expect(await read(f1, e2)).toEqual([
              { id: xA, value: "A" },
              { id: xB, value: "B" },
            ]);
            expect(await read(f1, f1e1)).toEqual([
              { id: xA, value: "A" },
              { id: xB, value: "B" },
              { id: xD, value: "D" },
            ]);
            expect(await read(f1, f1e2)).toEqual([
              { id: xB, value: "B" },
              { id: xD, value: "D" },
            ]);
            expect(await read(f1, f1e3)).toEqual([]);
            expect(await read(f1)).toEqual([]);
            expect(await read(f1child)).toEqual([
              { id: xA, value: "A" },
              { id: xB, value: "B" },
              { id: xD, value: "D" },
            ]);
            expect(await read(f2)).toEqual([]);
            expect(await read(f3)).toEqual([{ id: xC, value: "C" }]);
            const page = await s.readList(rewindList(f1child), { limit: 2 });
            expect({ ids: ids(page.items), next: page.next }).toEqual({ ids: [xA, xB], next: xB });
            const back = await s.readList(rewindList(f1child), { before: MAX, limit: 2 });
            expect({ ids: ids(back.items), next: back.next }).toEqual({ ids: [xB, xD], next: xB });
          });
          await matchesReferences("after the list-clear forks");
        },
      );

      it(
        t("§10.1 a fork before a later summary sees no head; a fork after it sees that head, not later ones"),
        async () => {
          const a = await main((tx) => tx.conversation());
          const [e1, e2, e3] = await main(
            (tx) =>
              [tx.entry(a, "user", user("q")), tx.entry(a, "assistant"), tx.entry(a, "user", user("q2"))] as const,
          );
          const e4 = await main((tx) => tx.entry(a, "summary", { head: e2, data: { summary: "s1" } }));
          const e5 = await main((tx) => tx.entry(a, "user"));
          const early = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e3 } }));
          const late = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e4 } }));
          const e6 = await main((tx) => tx.entry(a, "summary", { head: e5 }));
          const b1 = await main((tx) => tx.entry(early, "summary", { head: e1 }));
          const lateChild = await main((tx) => tx.conversation({ parent: { conversationId: late, at: e4 } }));
          const d1 = await main((tx) => tx.entry(lateChild, "summary", { head: tx.nextSeq }));

          const entry = async (id: Id) => (await s.getEntries([id])).get(id);
          await durably(async () => {
            expect(await s.newestHead(a, e3)).toBeUndefined();
            expect(await s.newestHead(a, e4)).toEqual({
              id: e4,
              conversationId: a,
              kind: "summary",
              head: e2,
              data: { summary: "s1" },
            });
            expect((await s.newestHead(a, e5))?.id).toBe(e4);
            expect((await s.newestHead(a, MAX))?.id).toBe(e6);
            expect(await s.newestHead(a, MAX)).toEqual(await entry(e6));
            expect(await s.newestHead(early, e3)).toBeUndefined();
            expect(await s.newestHead(early, MAX)).toEqual(await entry(b1));
            expect((await s.newestHead(late, MAX))?.id).toBe(e4);
            expect(await s.newestHead(late, e3)).toBeUndefined();
            expect((await s.newestHead(lateChild, e4))?.id).toBe(e4);
            expect(await s.newestHead(lateChild, MAX)).toEqual(await entry(d1));
            expect(ids((await s.scanEntries({ conversationId: early, limit: 100 })).items)).toEqual([e1, e2, e3, b1]);
            expect(ids((await s.scanEntries({ conversationId: late, limit: 100 })).items)).toEqual([e1, e2, e3, e4]);
            // The derived context of `late`: from its head's boundary through the target.
            expect(
              ids((await s.scanEntries({ conversationId: late, from: e2, through: MAX, limit: 100 })).items),
            ).toEqual([e2, e3, e4]);
          });
          await matchesReferences("after the summary forks");
        },
      );

      it(t("§10.1 nested source cutoffs: forks of forks at different points carry every ancestor cutoff"), async () => {
        const a = await main((tx) => tx.conversation());
        const a1 = await main((tx) => tx.entry(a, "user"));
        const a2 = await main((tx) => {
          tx.set(rewindValue(a), "p1");
          tx.append(rewindList(a), "m1");
          return tx.entry(a, "assistant");
        });
        const a3 = await main((tx) => tx.entry(a, "user", { key: "k1" }));
        const a4 = await main((tx) => {
          tx.set(rewindValue(a), "p2");
          tx.append(rewindList(a), "m2");
          return tx.entry(a, "assistant");
        });
        const b = await main((tx) => tx.conversation({ parent: { conversationId: a, at: a3 } }));
        const b1 = await main((tx) => {
          tx.set(rewindValue(b), "pb");
          return tx.entry(b, "user", { key: "k1" });
        });
        const b2 = await main((tx) => tx.entry(b, "assistant"));
        const c = await main((tx) => tx.conversation({ parent: { conversationId: b, at: b1 } }));
        const c1 = await main((tx) => {
          tx.append(rewindList(c), "mc");
          return tx.entry(c, "user");
        });
        const d = await main((tx) => tx.conversation({ parent: { conversationId: c, at: a2 } })); // an inherited point, two levels up
        const d1 = await main((tx) => tx.entry(d, "user"));
        const e = await main((tx) => tx.conversation({ parent: { conversationId: d, at: d1 } }));
        const e1 = await main((tx) => tx.entry(e, "user", { key: "k1" }));
        const f = await main((tx) => tx.conversation({ parent: { conversationId: e, at: 0 } })); // "start"
        const g = await main((tx) => tx.conversation({ parent: { conversationId: c, at: c1 } }));
        // Later writes in every source: none may leak into the forks.
        const late = await main((tx) => {
          tx.set(rewindValue(a), "late-a");
          tx.set(rewindValue(b), "late-b");
          tx.append(rewindList(c), "late-c");
          return { a: tx.entry(a, "user"), b: tx.entry(b, "user"), c: tx.entry(c, "user"), d: tx.entry(d, "user") };
        });
        // Deleting a middle conversation hides it but keeps what its forks inherited.
        await main((tx) => tx.deleteConversation(b));

        const transcript = async (conversationId: Id, q: { from?: Id; through?: Id; key?: string } = {}) =>
          ids((await s.scanEntries({ conversationId, limit: 100, ...q })).items);
        const list = async (conv: Id, at?: Id) =>
          (await s.readList(rewindList(conv), at === undefined ? { limit: 100 } : { at, limit: 100 })).items.map(
            (x) => x.value,
          );
        await durably(async () => {
          expect(await transcript(c)).toEqual([a1, a2, a3, b1, c1, late.c]);
          expect(await transcript(d)).toEqual([a1, a2, d1, late.d]);
          expect(await transcript(a)).toEqual([a1, a2, a3, a4, late.a]);
          expect(await transcript(e)).toEqual([a1, a2, d1, e1]);
          expect(await transcript(f)).toEqual([]);
          expect(await transcript(g)).toEqual([a1, a2, a3, b1, c1]);
          expect(await transcript(e, { from: a2, through: d1 })).toEqual([a2, d1]);
          expect(await transcript(g, { key: "k1" })).toEqual([a3, b1]);
          expect(await transcript(e, { key: "k1" })).toEqual([e1]);
          const pages: Id[][] = [];
          let before: Id | undefined = MAX;
          while (before !== undefined) {
            const page: { items: readonly Entry[]; next?: Id } = await s.scanEntries({
              conversationId: g,
              before,
              limit: 2,
            });
            pages.push(ids(page.items));
            before = page.next;
          }
          expect(pages).toEqual([[b1, c1], [a2, a3], [a1]]);
          expect(await s.getValue(rewindValue(c))).toEqual({ seq: b1 - 1, value: "pb" });
          expect(await s.getValue(rewindValue(c), a3)).toEqual({ seq: a2 - 2, value: "p1" });
          expect(await s.getValue(rewindValue(d))).toEqual({ seq: a2 - 2, value: "p1" });
          expect(await s.getValue(rewindValue(e), a1)).toBeUndefined();
          expect(await s.getValue(rewindValue(e))).toEqual({ seq: a2 - 2, value: "p1" });
          expect(await s.getValue(rewindValue(f))).toBeUndefined();
          expect(await s.getValue(rewindValue(g))).toEqual({ seq: b1 - 1, value: "pb" });
          expect(await list(g)).toEqual(["m1", "mc"]);
          expect(await list(c)).toEqual(["m1", "mc", "late-c"]);
          expect(await list(c, b1)).toEqual(["m1"]);
          expect(await list(e)).toEqual(["m1"]);
          expect(await list(f)).toEqual([]);
          expect(await list(a)).toEqual(["m1", "m2"]);
          expect([...(await s.getConversations([a, b, c])).keys()].sort((x, y) => x - y)).toEqual([a, c]);
          expect(ids((await s.scanConversations({ limit: 100 })).items)).toEqual([a, c, d, e, f, g]);
          expect(ids((await s.scanConversations({ parent: c, limit: 100 })).items)).toEqual([d, g]);
          expect(a4).toBeGreaterThan(a3);
          expect(b2).toBeGreaterThan(b1);
        });
        await matchesReferences("after the nested forks");
      });

      it(t("§10.1 sticky, session and scratch state is untouched by historical reads, which reject"), async () => {
        const a = await main((tx) => tx.conversation());
        const task = await main((tx) => tx.task(a, "generation"));
        const e1 = await main((tx) => {
          tx.set(rewindValue(a), "r");
          return tx.entry(a, "user");
        });
        await main((tx) => {
          tx.set(sessionValue("sess.name"), "session");
          tx.append(sessionList("sess.inbox"), "in");
          tx.set(conversationValue(a, "ui.expanded", undefined, false), true);
          tx.append(conversationList(a, "ui.queue", undefined, false), "q");
        });
        await scratch(task, (tx) => {
          tx.set(scratchValue(task, "checkpoint"), { n: 1 });
          tx.append(scratchList(task, "frames"), "frame");
        });
        const fork = await main((tx) => tx.conversation({ parent: { conversationId: a, at: e1 } }));
        const before = await dump();
        const lastSeq = s.lastSeq;
        const values = [
          sessionValue("sess.name"),
          conversationValue(a, "ui.expanded", undefined, false),
          scratchValue(task, "checkpoint"),
        ];
        const lists = [
          sessionList("sess.inbox"),
          conversationList(a, "ui.queue", undefined, false),
          scratchList(task, "frames"),
        ];
        for (const at of [0, e1, lastSeq, MAX]) {
          for (const addr of values) expect(await rejection(s.getValue(addr, at))).toBe("historical_read");
          for (const addr of lists)
            expect(await rejection(s.readList(addr, { at, limit: 10 }))).toBe("historical_read");
          // Historical reads of rewindable state change nothing either.
          await s.getValue(rewindValue(a), at);
          await s.readList(rewindList(a), { at, limit: 10 });
        }
        expect(s.lastSeq).toBe(lastSeq);
        expectSameDump(before, await dump(), "after historical reads");
        await durably(async () => {
          expect(await s.getValue(sessionValue("sess.name"))).toEqual({ seq: e1 + 1, value: "session" });
          expect(await s.getValue(conversationValue(a, "ui.expanded", undefined, false))).toEqual({
            seq: e1 + 3,
            value: true,
          });
          // Forks inherit rewindable state and the session's, never sticky conversation state or scratch.
          expect(await s.getValue(conversationValue(fork, "ui.expanded", undefined, false))).toBeUndefined();
          expect((await s.readList(conversationList(fork, "ui.queue", undefined, false), { limit: 10 })).items).toEqual(
            [],
          );
          expect(await s.getValue(rewindValue(fork))).toEqual({ seq: e1 - 1, value: "r" });
          expect((await s.getValue(scratchValue(task, "checkpoint")))?.value).toEqual({ n: 1 });
        });
        await matchesReferences("after historical reads");
      });
    });

    it(
      t(
        "edge writes agree with the references: removes naming other lists' elements, several writes to one address in a batch, forks at an entry of the same batch",
      ),
      async () => {
        const queue = (c: Id) => conversationList(c, "ui.queue", undefined, false);
        const [a, b, task] = await main((tx) => {
          const first = tx.conversation();
          return [first, tx.conversation(), tx.task(first, "job")] as const;
        });
        const [x1, y1, s1, e1] = await main((tx) => {
          const appended = [
            tx.append(queue(a), "x1"),
            tx.append(queue(b), "y1"),
            tx.append(sessionList("sess.inbox"), "s1"),
          ] as const;
          tx.append(rewindList(a), "m1");
          return [...appended, tx.entry(a, "user")] as const;
        });
        // A remove names an element of another list, or no element at all: it hides nothing there.
        await main((tx) => {
          tx.remove(queue(b), x1);
          tx.remove(sessionList("sess.inbox"), y1);
          tx.remove(queue(a), e1);
          tx.remove(rewindList(b), s1);
        });
        // Several writes to one address in one batch: the last one wins; deleting an absent value is harmless.
        await main((tx) => {
          tx.set(sessionValue("sess.name"), 1);
          tx.delete(sessionValue("sess.name"));
          tx.delete(sessionValue("sess.name", "a"));
          tx.set(rewindValue(a), 1);
          tx.delete(rewindValue(a));
          tx.set(rewindValue(a, "model"), "m");
          tx.delete(rewindValue(b));
        });
        await main((tx) => {
          const z = tx.append(sessionList("sess.inbox"), "z");
          tx.remove(sessionList("sess.inbox"), z);
          tx.clear(sessionList("sess.inbox"));
          tx.append(sessionList("sess.inbox"), "after");
          tx.remove(sessionList("sess.inbox"), s1);
        });
        // A fork at an entry minted earlier in the same batch, written to in that batch.
        const fork = await main((tx) => {
          const e = tx.entry(a, "user");
          const f = tx.conversation({ parent: { conversationId: a, at: e } });
          tx.append(rewindList(f), "fm");
          tx.entry(f, "summary", { head: e });
          return f;
        });
        await scratch(task, (tx) => {
          const q = tx.append(scratchList(task, "frames"), 1);
          tx.remove(scratchList(task, "frames"), x1);
          tx.clear(scratchList(task, "frames"));
          tx.clear(scratchList(task, "frames"));
          tx.append(scratchList(task, "frames"), q);
        });
        // A task created, patched with a mark and settled in one batch.
        await main((tx) => {
          const t2 = tx.task(b, "job");
          tx.patch(t2, "inflight", { status: "r" }, { abort: true });
          tx.settle(t2, { status: "done" });
          tx.patch(task, "start", { status: "again" });
        });
        await durably(async () => {
          expect((await s.readList(queue(a), { limit: 10 })).items.map((x) => x.value)).toEqual(["x1"]);
          expect((await s.readList(queue(b), { limit: 10 })).items.map((x) => x.value)).toEqual(["y1"]);
          expect((await s.readList(sessionList("sess.inbox"), { limit: 10 })).items.map((x) => x.value)).toEqual([
            "after",
          ]);
          expect(await s.getValue(sessionValue("sess.name"))).toBeUndefined();
          expect(await s.getValue(rewindValue(a))).toBeUndefined();
          expect((await s.readList(rewindList(fork), { limit: 10 })).items.map((x) => x.value)).toEqual(["m1", "fm"]);
          expect((await s.readList(scratchList(task, "frames"), { limit: 10 })).items.map((x) => x.value)).toEqual([
            expect.any(Number),
          ]);
          expect(y1).toBe(x1 + 1);
        });
        await matchesReferences("after edge writes", { probeNext: true });
      },
    );

    // -------------------------------------------------------------------------------------------
    // §10.2 and rejection: a rejected batch writes nothing and consumes no ids

    /** A small session every rejection case starts from: a conversation, entries, a live and a settled task. */
    const setup = async () => {
      const a = await main((tx) => tx.conversation());
      const e1 = await main((tx) => tx.entry(a, "user", user("hello")));
      const live = await main((tx) => tx.task(a, "generation", { role: "inflight", state: { status: "streaming" } }));
      const settled = await main((tx) => tx.task(a, "tool"));
      await scratch(live, (tx) => tx.append(scratchList(live, "frames"), "f1"));
      await scratch(settled, (tx) => tx.set(scratchValue(settled, "checkpoint"), 1));
      await main((tx) => tx.settle(settled, { status: "done" }));
      const gone = await main((tx) => tx.conversation());
      await main((tx) => tx.deleteConversation(gone));
      return { a, e1, live, settled, gone };
    };

    /**
     * The batch rejects with `code`, and storage, reopened or not, is exactly as before; the next commit reuses the
     * ids.
     */
    const rejectsWhole = async (
      conversation: Id,
      batch: CommitBatch,
      code: StorageErrorCode,
      probe: (lastSeq: Id) => Promise<void>,
    ) => {
      const before = await dump();
      const lastSeq = s.lastSeq;
      expect(await rejection(s.commit(batch))).toBe(code);
      expect(s.lastSeq).toBe(lastSeq);
      await probe(lastSeq);
      await durably(async () => {
        expect(s.lastSeq).toBe(lastSeq);
        expectSameDump(before, await dump(), "after the rejected batch");
      });
      // No ids were consumed: the next batch starts where the rejected one did.
      const next = await main((tx) => tx.entry(conversation, "user"));
      expect(next).toBe(lastSeq + 1);
      await matchesReferences("after the rejected batch and one more");
    };

    it(t("§10.2 Main and scratch writes in one batch"), async () => {
      const { a, live } = await setup();
      const last = s.lastSeq;
      const mixed: CommitBatch = {
        kind: "main",
        writes: [
          { type: "value.set", addr: rewindValue(a), value: "x" },
          { type: "entry", entry: { id: last + 2, conversationId: a, kind: "user" } },
          { type: "value.set", addr: scratchValue(live, "checkpoint"), value: "y" },
        ],
      };
      await rejectsWhole(a, mixed, "malformed_batch", async (lastSeq) => {
        expect((await s.getEntries([lastSeq + 2])).size).toBe(0);
        expect(await s.getValue(rewindValue(a))).toBeUndefined();
        expect(await s.getValue(scratchValue(live, "checkpoint"))).toBeUndefined();
      });
      // The other direction: a scratch batch carrying main writes (an entry; conversation or session state).
      const entryInScratch = {
        kind: "scratch",
        task: live,
        writes: [
          { type: "list.append", addr: scratchList(live, "frames"), value: "f2" },
          { type: "entry", entry: { id: s.lastSeq + 2, conversationId: a, kind: "user" } },
        ],
      } as unknown as CommitBatch;
      await rejectsWhole(a, entryInScratch, "malformed_batch", async () => {
        expect((await s.readList(scratchList(live, "frames"), { limit: 10 })).items.map((x) => x.value)).toEqual([
          "f1",
        ]);
      });
      for (const addr of [rewindValue(a), sessionValue("sess.name")]) {
        const stateInScratch: CommitBatch = {
          kind: "scratch",
          task: live,
          writes: [
            { type: "value.set", addr: scratchValue(live, "checkpoint"), value: 1 },
            { type: "value.set", addr, value: 2 },
          ],
        };
        await rejectsWhole(a, stateInScratch, "malformed_batch", async () => {
          expect(await s.getValue(scratchValue(live, "checkpoint"))).toBeUndefined();
          expect(await s.getValue(addr)).toBeUndefined();
        });
      }
    });

    describe("malformed batches reject whole and write nothing", () => {
      type Case = (ctx: Awaited<ReturnType<typeof setup>>, seq: (i: number) => Id) => CommitBatch;
      const okWrites = (a: Id, seq: (i: number) => Id): MainWrite[] => [
        { type: "value.set", addr: sessionValue("sess.name"), value: "before" },
        { type: "entry", entry: { id: seq(1), conversationId: a, kind: "user" } },
        { type: "list.append", addr: rewindList(a), value: "x" },
      ];
      const mainOf = (writes: MainWrite[]): CommitBatch => ({ kind: "main", writes });
      const cases: [string, Case, StorageErrorCode?][] = [
        [
          "an entry id that is not its sequence",
          ({ a }, seq) =>
            mainOf([
              ...okWrites(a, seq),
              { type: "entry", entry: { id: seq(3) + 1, conversationId: a, kind: "user" } },
            ]),
        ],
        [
          "a task id that is not its sequence",
          ({ a }, seq) =>
            mainOf([
              ...okWrites(a, seq),
              {
                type: "task",
                task: { id: seq(2), conversationId: a, kind: "job", role: "start", state: { status: "p" }, after: [] },
              },
            ]),
        ],
        [
          "a conversation id that is not its sequence",
          ({ a }, seq) => mainOf([...okWrites(a, seq), { type: "createConversation", conversation: { id: seq(0) } }]),
        ],
        [
          "an entry in an unknown conversation",
          ({ a }, seq) =>
            mainOf([...okWrites(a, seq), { type: "entry", entry: { id: seq(3), conversationId: 9999, kind: "user" } }]),
        ],
        [
          "an entry in a deleted conversation",
          ({ a, gone }, seq) =>
            mainOf([...okWrites(a, seq), { type: "entry", entry: { id: seq(3), conversationId: gone, kind: "user" } }]),
        ],
        [
          "state of an unknown conversation",
          ({ a }, seq) => mainOf([...okWrites(a, seq), { type: "value.set", addr: rewindValue(9999), value: 1 }]),
        ],
        [
          "a fork of an unknown conversation",
          ({ a }, seq) =>
            mainOf([
              ...okWrites(a, seq),
              { type: "createConversation", conversation: { id: seq(3), parent: { conversationId: 9999, at: 0 } } },
            ]),
        ],
        [
          "a patch of a terminal task",
          ({ a, settled }, seq) =>
            mainOf([...okWrites(a, seq), { type: "patch", id: settled, role: "inflight", state: { status: "again" } }]),
        ],
        [
          "a settle of a terminal task",
          ({ a, settled }, seq) =>
            mainOf([
              ...okWrites(a, seq),
              { type: "settle", id: settled, role: "terminal", state: { status: "twice" } },
            ]),
        ],
        [
          "a patch of an unknown task",
          ({ a }, seq) =>
            mainOf([...okWrites(a, seq), { type: "patch", id: 9999, role: "inflight", state: { status: "x" } }]),
        ],
        [
          "a list remove of a later element",
          ({ a }, seq) => mainOf([...okWrites(a, seq), { type: "list.remove", addr: rewindList(a), element: seq(3) }]),
        ],
        [
          "a scratch batch for a settled task",
          ({ settled }) => ({
            kind: "scratch",
            task: settled,
            writes: [{ type: "value.set", addr: scratchValue(settled, "checkpoint"), value: 2 }],
          }),
        ],
        [
          "a scratch batch for an unknown task",
          () => ({
            kind: "scratch",
            task: 9999,
            writes: [{ type: "value.set", addr: scratchValue(9999, "checkpoint"), value: 2 }],
          }),
        ],
        [
          "a scratch batch writing another task's scratch",
          ({ live, settled }) => ({
            kind: "scratch",
            task: live,
            writes: [{ type: "value.set", addr: scratchValue(settled, "checkpoint"), value: 2 }],
          }),
        ],
        [
          "an oversized payload",
          ({ a }, seq) =>
            mainOf([
              ...okWrites(a, seq),
              { type: "value.set", addr: sessionValue("sess.name", "a"), value: "x".repeat(MAX_PAYLOAD_BYTES + 1) },
            ]),
          "too_large",
        ],
      ];
      for (const [name, build, code] of cases) {
        it(t(`a malformed batch rejects whole and writes nothing: ${name}`), async () => {
          const ctx = await setup();
          const first = s.lastSeq + 1;
          await rejectsWhole(
            ctx.a,
            build(ctx, (i) => first + i),
            code ?? "malformed_batch",
            async (lastSeq) => {
              expect(await s.getValue(sessionValue("sess.name"))).toBeUndefined();
              expect((await s.getEntries([lastSeq + 2])).size).toBe(0);
            },
          );
        });
      }
    });

    it(t("an empty commit writes nothing and returns the empty range at lastSeq + 1"), async () => {
      const { a, live } = await setup();
      const before = await dump();
      const lastSeq = s.lastSeq;
      expect(await s.commit({ kind: "main", writes: [] })).toEqual({ first: lastSeq + 1, last: lastSeq });
      expect(await s.commit({ kind: "scratch", task: live, writes: [] })).toEqual({
        first: lastSeq + 1,
        last: lastSeq,
      });
      expect(s.lastSeq).toBe(lastSeq);
      await durably(async () => {
        expect(s.lastSeq).toBe(lastSeq);
        expectSameDump(before, await dump(), "after empty commits");
      });
      expect(await main((tx) => tx.entry(a, "user"))).toBe(lastSeq + 1);
      await matchesReferences("after empty commits", { probeNext: true });
    });

    // -------------------------------------------------------------------------------------------
    // Scratch lifetime (§4.6)

    it(t("settle retires the task's scratch in the same commit; other tasks' scratch stays"), async () => {
      const a = await main((tx) => tx.conversation());
      const [t1, t2] = await main((tx) => [tx.task(a, "generation"), tx.task(a, "tool")] as const);
      await scratch(t1, (tx) => {
        tx.clear(scratchList(t1, "frames"));
        tx.set(scratchValue(t1, "checkpoint"), { through: 1 });
        tx.set(scratchValue(t1, "checkpoint", "a"), "memo");
        tx.append(scratchList(t1, "frames"), "f1");
        tx.append(scratchList(t1, "frames"), "f2");
      });
      const f3 = await scratch(t1, (tx) => tx.append(scratchList(t1, "frames"), "f3"));
      await scratch(t1, (tx) => tx.remove(scratchList(t1, "frames"), f3));
      await scratch(t2, (tx) => tx.set(scratchValue(t2, "checkpoint"), "t2"));
      // A patch is not a settlement: scratch survives it.
      await main((tx) => tx.patch(t1, "inflight", { status: "streaming" }));
      expect((await s.readList(scratchList(t1, "frames"), { limit: 10 })).items.map((x) => x.value)).toEqual([
        "f1",
        "f2",
      ]);
      expect(
        (await s.scanValues({ scope: { scratch: t1 }, namespace: "checkpoint", limit: 10 })).items.map((x) => x.key),
      ).toEqual(["", "a"]);
      const result = await main((tx) => {
        const id = tx.entry(a, "assistant", { data: { frames: 2 } });
        tx.settle(t1, { status: "done", result: id });
        return id;
      });
      await durably(async () => {
        expect(await s.getValue(scratchValue(t1, "checkpoint"))).toBeUndefined();
        expect(await s.getValue(scratchValue(t1, "checkpoint", "a"))).toBeUndefined();
        expect((await s.scanValues({ scope: { scratch: t1 }, namespace: "checkpoint", limit: 10 })).items).toEqual([]);
        expect((await s.readList(scratchList(t1, "frames"), { limit: 10 })).items).toEqual([]);
        expect(await s.getValue(scratchValue(t2, "checkpoint"))).toEqual({ seq: expect.any(Number), value: "t2" });
        expect((await s.getTasks([t1])).get(t1)?.state).toEqual({ status: "done", result });
      });
      // A late frame cannot recreate what settle deleted.
      const late: CommitBatch = {
        kind: "scratch",
        task: t1,
        writes: [{ type: "list.append", addr: scratchList(t1, "frames"), value: "late" }],
      };
      expect(await rejection(s.commit(late))).toBe("malformed_batch");
      expect((await s.readList(scratchList(t1, "frames"), { limit: 10 })).items).toEqual([]);
      await matchesReferences("after settlement", { probeNext: true });
    });

    if (durable) {
      it(
        t("§10.2 Main 100, live scratch through 150, crash: reopen recovers lastSeq=150; next write=151"),
        async () => {
          const a = await main((tx) => {
            const a = tx.conversation();
            for (let i = 0; i < 98; i++) tx.entry(a, "user");
            return a;
          });
          const task = await main((tx) => tx.task(a, "generation"));
          expect(task).toBe(100);
          for (let i = 0; i < 50; i += 10) {
            // Ten single-append scratch commits at a time keep this quick on every backend.
            for (let j = 0; j < 10; j++) await scratch(task, (tx) => tx.append(scratchList(task, "frames"), i + j));
          }
          expect(s.lastSeq).toBe(150);
          await reopen("crash");
          expect(s.lastSeq).toBe(150);
          const frames = await s.readList(scratchList(task, "frames"), { limit: 100 });
          expect(frames.items.map((x) => x.id)).toEqual(Array.from({ length: 50 }, (_, i) => 101 + i));
          expect(await main((tx) => tx.settle(task, { status: "done" }))).toBe(151);
          await reopen("crash");
          expect(s.lastSeq).toBe(151);
          expect((await s.readList(scratchList(task, "frames"), { limit: 100 })).items).toEqual([]);
          await matchesReferences("after the scratch crash", { probeNext: true });
        },
      );
    }

    // -------------------------------------------------------------------------------------------
    // Tasks (§5.1, §7.3)

    it(
      t("patch replaces state and role, keeps the abort mark for good and replaces owns; settle keeps the mark"),
      async () => {
        const a = await main((tx) => tx.conversation());
        const [t1, t2] = await main((tx) => {
          const first = tx.task(a, "generation", { background: true });
          return [first, tx.task(a, "tool", { after: [first] })] as const;
        });
        const child = await main((tx) => {
          const c = tx.conversation({ owner: t1 });
          tx.patch(t1, "inflight", { status: "spawned" }, { owns: [c] });
          return c;
        });
        await main((tx) => tx.patch(t1, "inflight", { status: "cancelling" }, { abort: true }));
        await main((tx) => tx.patch(t1, "start", { status: "retry" }));
        await durably(async () => {
          expect((await s.getTasks([t1])).get(t1)).toEqual({
            id: t1,
            conversationId: a,
            kind: "generation",
            role: "start",
            state: { status: "retry" },
            after: [],
            background: true,
            owns: [child],
            abort: true,
          });
          expect(ids((await s.scanTasks({ abort: true, limit: 10 })).items)).toEqual([t1]);
          expect(ids((await s.scanTasks({ abort: false, limit: 10 })).items)).toEqual([t2]);
          expect(ids((await s.scanConversations({ ownedFrom: t1, limit: 10 })).items)).toEqual([child]);
        });
        await main((tx) => tx.settle(t1, { status: "aborted" }));
        await durably(async () => {
          const settled = (await s.getTasks([t1])).get(t1);
          expect({ role: settled?.role, state: settled?.state, abort: settled?.abort, owns: settled?.owns }).toEqual({
            role: "terminal",
            state: { status: "aborted" },
            abort: true,
            owns: [child],
          });
          expect(ids((await s.scanTasks({ live: true, limit: 10 })).items)).toEqual([t2]);
          expect(ids((await s.scanTasks({ live: false, limit: 10 })).items)).toEqual([t1]);
          expect(ids((await s.scanTasks({ role: "terminal", abort: true, limit: 10 })).items)).toEqual([t1]);
        });
        await matchesReferences("after task lifecycles");
      },
    );

    // -------------------------------------------------------------------------------------------
    // Paging (the Cursor doc in records.ts) and Page.readAt

    it(
      t("paging follows the Cursor doc: forward by after, backward by before, windows, next only when more match"),
      async () => {
        const a = await main((tx) => tx.conversation());
        const e = await main((tx) =>
          Array.from({ length: 7 }, (_, i) => tx.entry(a, i % 2 === 0 ? "user" : "assistant")),
        );
        const [tasks, elements] = await main((tx) => [
          Array.from({ length: 5 }, () => tx.task(a, "job")),
          Array.from({ length: 5 }, (_, i) => tx.append(rewindList(a), i)),
        ]);
        const at = (i: number) => e[i] as Id;
        const chain = async (
          fetch: (q: {
            after?: Id;
            before?: Id;
            limit: number;
          }) => Promise<{ items: readonly { id: Id }[]; next?: Id }>,
          start: { after?: Id; before?: Id; limit: number },
        ) => {
          const out: { ids: Id[]; next?: Id }[] = [];
          let q = start;
          for (;;) {
            const page = await fetch(q);
            out.push(page.next === undefined ? { ids: ids(page.items) } : { ids: ids(page.items), next: page.next });
            if (page.next === undefined) return out;
            q =
              start.before !== undefined && start.after === undefined
                ? { ...start, before: page.next }
                : { ...start, after: page.next };
          }
        };
        await durably(async () => {
          const entries = (q: { after?: Id; before?: Id; limit: number }) => s.scanEntries({ conversationId: a, ...q });
          expect(await chain(entries, { limit: 3 })).toEqual([
            { ids: [at(0), at(1), at(2)], next: at(2) },
            { ids: [at(3), at(4), at(5)], next: at(5) },
            { ids: [at(6)] },
          ]);
          expect(await chain(entries, { before: MAX, limit: 3 })).toEqual([
            { ids: [at(4), at(5), at(6)], next: at(4) },
            { ids: [at(1), at(2), at(3)], next: at(1) },
            { ids: [at(0)] },
          ]);
          expect(await chain(entries, { limit: 7 })).toEqual([{ ids: e }]);
          expect(await chain(entries, { before: at(6) + 1, limit: 7 })).toEqual([{ ids: e }]);
          expect(await chain(entries, { after: at(1), before: at(6), limit: 2 })).toEqual([
            { ids: [at(2), at(3)], next: at(3) },
            { ids: [at(4), at(5)] },
          ]);
          expect(await chain(entries, { after: at(6), limit: 2 })).toEqual([{ ids: [] }]);
          expect(await chain(entries, { before: at(0), limit: 2 })).toEqual([{ ids: [] }]);
          expect(
            await chain((q) => s.scanEntries({ conversationId: a, kind: "assistant", ...q }), {
              before: MAX,
              limit: 2,
            }),
          ).toEqual([{ ids: [at(3), at(5)], next: at(3) }, { ids: [at(1)] }]);
          expect(await chain((q) => s.scanTasks(q), { limit: 2 })).toEqual([
            { ids: tasks.slice(0, 2), next: tasks[1] },
            { ids: tasks.slice(2, 4), next: tasks[3] },
            { ids: tasks.slice(4) },
          ]);
          expect(await chain((q) => s.scanTasks(q), { before: MAX, limit: 4 })).toEqual([
            { ids: tasks.slice(1), next: tasks[1] },
            { ids: tasks.slice(0, 1) },
          ]);
          expect(await chain((q) => s.readList(rewindList(a), q), { after: elements[0], limit: 2 })).toEqual([
            { ids: elements.slice(1, 3), next: elements[2] },
            { ids: elements.slice(3) },
          ]);
          expect(await chain((q) => s.readList(rewindList(a), q), { before: elements[4], limit: 3 })).toEqual([
            { ids: elements.slice(1, 4), next: elements[1] },
            { ids: elements.slice(0, 1) },
          ]);
          expect(await chain((q) => s.scanConversations(q), { limit: 1 })).toEqual([{ ids: [a] }]);
        });
        for (const limit of [0, -1, 1.5, 1001]) {
          expect(await rejection(s.scanEntries({ conversationId: a, limit }))).toBe("bad_query");
          expect(await rejection(s.scanTasks({ limit }))).toBe("bad_query");
          expect(await rejection(s.readList(rewindList(a), { limit }))).toBe("bad_query");
        }
        expect(await rejection(s.scanEntries({ conversationId: 9999, limit: 10 }))).toBe("bad_query");
        await matchesReferences("after paging");
      },
    );

    it(t("Page.readAt is the storage's lastSeq when the page was read"), async () => {
      const a = await main((tx) => tx.conversation());
      const task = await main((tx) => {
        tx.set(sessionValue("sess.name"), 1);
        tx.entry(a, "user");
        return tx.task(a, "job");
      });
      const pages = async () => [
        await s.scanConversations({ limit: 10 }),
        await s.scanEntries({ conversationId: a, limit: 10 }),
        await s.scanTasks({ limit: 10 }),
        await s.scanValues({ scope: { session: true }, namespace: "sess.name", limit: 10 }),
        await s.readList(rewindList(a), { limit: 10 }),
      ];
      for (const page of await pages()) expect(page.readAt).toBe(4);
      await scratch(task, (tx) => tx.set(scratchValue(task, "checkpoint"), 1));
      await main((tx) => tx.entry(a, "user"));
      await durably(async () => {
        for (const page of await pages()) expect(page.readAt).toBe(6);
      });
    });

    if (probe.inside !== undefined) {
      // The suite reads its dumps through `inside`; this pins that the handle tests use answers the same,
      // including errors (codes) and Maps crossing the boundary.
      it(t("the storage handle answers exactly like reads made where the storage lives"), async () => {
        await replay(generateStream(RANDOM_SEEDS[0] as number, { batches: 15 }));
        expectSameDump(await dump(), await readDump(s), "read through the handle, against reads inside");
      });
    }

    // -------------------------------------------------------------------------------------------
    // Values, isolation, close

    it(t("scanValues orders keys in JS string order and pages by after until a short page"), async () => {
      const keys = ["b", "B", "a", "é", "ab", "a b", "Z"];
      await main((tx) => {
        tx.set(sessionValue("sess.name"), "keyless");
        for (const key of keys) tx.set(sessionValue("sess.name", key), key);
        tx.set(sessionValue("sess.other", "a"), "other namespace");
        tx.delete(sessionValue("sess.name", "ab"));
      });
      const expected = ["", "B", "Z", "a", "a b", "b", "é"];
      await durably(async () => {
        const all = await s.scanValues({ scope: { session: true }, namespace: "sess.name", limit: 100 });
        expect(all.items.map((x) => x.key)).toEqual(expected);
        expect(all.next).toBeUndefined();
        expect(all.items[0]?.version).toEqual({ seq: 1, value: "keyless" });
        const paged: string[][] = [];
        let after: string | undefined;
        for (;;) {
          const page = await s.scanValues({
            scope: { session: true },
            namespace: "sess.name",
            limit: 3,
            ...(after === undefined ? {} : { after }),
          });
          paged.push(page.items.map((x) => x.key));
          if (page.items.length < 3) break;
          after = page.items.at(-1)?.key;
        }
        expect(paged).toEqual([expected.slice(0, 3), expected.slice(3, 6), expected.slice(6)]);
      });
      await matchesReferences("after scanValues");
    });

    it(t("scanValues orders keys outside the Basic Multilingual Plane in JS string order"), async () => {
      // U+1F600 is a surrogate pair in UTF-16 (sorts before U+FFFD in JS) but 4 UTF-8 bytes (after it bytewise).
      await main((tx) => {
        tx.set(sessionValue("sess.name", "\u{1F600}"), 1);
        tx.set(sessionValue("sess.name", "\uFFFD"), 2);
      });
      const all = await s.scanValues({ scope: { session: true }, namespace: "sess.name", limit: 10 });
      expect(all.items.map((x) => x.key)).toEqual(["\u{1F600}", "\uFFFD"]);
      await matchesReferences("after astral keys");
    });

    it(
      t(
        "kinds and keys that are not well-formed UTF-16 (lone surrogates) read back unchanged, or the batch is rejected whole",
      ),
      async () => {
        // JS strings may hold lone surrogates and JSON can carry them escaped; a backend must not silently
        // turn them into U+FFFD. Rejecting such a batch (malformed_batch, nothing written) is also acceptable.
        const odd = "x\uD800y";
        const a = await main((tx) => tx.conversation());
        const tx = new MainBuilder(s.lastSeq);
        const task = tx.task(a, odd);
        const entry = tx.entry(a, odd, { key: odd });
        tx.set(sessionValue(odd, odd), 1);
        const batch = tx.batch();
        const outcome = await s.commit(batch).then(
          () => "committed",
          (error: unknown) => (error instanceof StorageError ? error.code : String(error)),
        );
        if (outcome !== "committed") {
          expect(outcome).toBe("malformed_batch");
          expect(s.lastSeq).toBe(a);
          return;
        }
        log.push(batch);
        // Compared as JSON text: JSON.stringify escapes lone surrogates, and a raw one in a failure message
        // would break the test runner's channel (invalid UTF-8).
        const esc = (value: unknown): string => JSON.stringify(value) ?? "undefined";
        await durably(async () => {
          const stored = (await s.getEntries([entry])).get(entry);
          expect(esc({ kind: stored?.kind, key: stored?.key })).toBe(esc({ kind: odd, key: odd }));
          expect(esc((await s.getTasks([task])).get(task)?.kind)).toBe(esc(odd));
          expect(esc(await s.entryKinds())).toBe(esc([odd]));
          expect(ids((await s.scanEntries({ conversationId: a, key: odd, kind: odd, limit: 10 })).items)).toEqual([
            entry,
          ]);
          expect(ids((await s.scanEntries({ conversationId: a, key: "x\uD801y", limit: 10 })).items)).toEqual([]);
          expect(ids((await s.scanTasks({ kind: odd, limit: 10 })).items)).toEqual([task]);
          expect(
            esc((await s.scanValues({ scope: { session: true }, namespace: odd, limit: 10 })).items.map((x) => x.key)),
          ).toBe(esc([odd]));
        });
        await matchesReferences("after lone surrogates");
      },
    );

    it(t("Task status round-trips on every backend"), async () => {
      // A status is whatever string the kind chose; a backend that keeps it beside the state (a column)
      // must give back the same string after a reopen as its cache and the memory backend do (§10.1).
      // Lone surrogates are the case a TEXT column changes (to U+FFFD); NUL and astral characters must
      // survive too. Each status sits first, last and in the middle of its state.
      const statuses = ["\uD800", "x\uDC00", "\uDBFF\uD800", "a\u0000b", "\u{1F600}", "\uFFFD", "plain"];
      const a = await main((tx) => tx.conversation());
      const created = await main((tx) =>
        statuses.flatMap((status) => [
          tx.task(a, "job", { state: { status } }),
          tx.task(a, "job", { state: { status, n: 1 } }),
          tx.task(a, "job", { state: { n: 1, status } }),
          tx.task(a, "job", { state: { n: 1, status, m: 2 } }),
        ]),
      );
      // Patched to another odd status (first key, last key) and settled with one: every write path that
      // stores a status.
      const [first, last, settled] = created as [Id, Id, Id];
      await main((tx) => {
        tx.patch(first, "inflight", { status: "\uDC00", at: "first" });
        tx.patch(last, "inflight", { at: "last", status: "y\uD83D" });
        tx.settle(settled, { status: "\uD83D" });
      });
      const expected = new Map<Id, TaskStateBase>();
      statuses.forEach((status, i) => {
        expected.set(created[4 * i] as Id, { status });
        expected.set(created[4 * i + 1] as Id, { status, n: 1 });
        expected.set(created[4 * i + 2] as Id, { n: 1, status });
        expected.set(created[4 * i + 3] as Id, { n: 1, status, m: 2 });
      });
      expected.set(first, { status: "\uDC00", at: "first" });
      expected.set(last, { at: "last", status: "y\uD83D" });
      expected.set(settled, { status: "\uD83D" });
      // Compared as JSON text: it keeps key order and escapes lone surrogates (a raw one in a failure
      // message would break the runner's channel).
      const esc = (value: unknown): string => JSON.stringify(value) ?? "undefined";
      const want = esc([...expected.entries()].map(([id, state]) => [id, state]));
      await durably(async () => {
        const got = await s.getTasks([...expected.keys()]);
        expect(esc([...expected.keys()].map((id) => [id, got.get(id)?.state]))).toBe(want);
        const scanned = await s.scanTasks({ conversationIds: [a], limit: 100 });
        expect(esc(scanned.items.map((task) => [task.id, task.state]))).toBe(want);
        const live = await s.scanTasks({ conversationIds: [a], live: true, limit: 100 });
        expect(esc(live.items.map((task) => [task.id, task.state]))).toBe(
          esc([...expected.entries()].filter(([id]) => id !== settled)),
        );
      });
      await matchesReferences("after odd statuses");
    });

    it(t("reads return data callers cannot use to mutate storage, and committed batches are not aliased"), async () => {
      const data: { list: JsonValue[] } = { list: [1, 2] };
      const value: { nested: { n: number } } = { nested: { n: 1 } };
      const a = await main((tx) => tx.conversation());
      const [e1, t1] = await main((tx) => {
        tx.set(sessionValue("sess.name"), value);
        return [tx.entry(a, "user", { data }), tx.task(a, "job", { state: { status: "s", deep: { n: 1 } } })] as const;
      });
      // The caller mutates what it committed.
      data.list.push(3);
      value.nested.n = 2;
      const tryMutate = (fn: () => void) => {
        try {
          fn();
        } catch {
          // Frozen records throw in strict mode; that is one acceptable outcome.
        }
      };
      const entry = (await s.getEntries([e1])).get(e1) as unknown as { kind: string; data: { list: number[] } };
      tryMutate(() => {
        entry.kind = "changed";
      });
      tryMutate(() => entry.data.list.push(4));
      const page = await s.scanEntries({ conversationId: a, limit: 10 });
      tryMutate(() => (page.items as unknown as Entry[]).pop());
      const task = (await s.getTasks([t1])).get(t1) as unknown as { state: { deep: { n: number } } };
      tryMutate(() => {
        task.state.deep.n = 9;
      });
      const version = (await s.getValue(sessionValue("sess.name"))) as unknown as { value: { nested: { n: number } } };
      tryMutate(() => {
        version.value.nested.n = 9;
      });
      expect((await s.getEntries([e1])).get(e1)).toEqual({
        id: e1,
        conversationId: a,
        kind: "user",
        data: { list: [1, 2] },
      });
      expect(ids((await s.scanEntries({ conversationId: a, limit: 10 })).items)).toEqual([e1]);
      expect((await s.getTasks([t1])).get(t1)?.state).toEqual({ status: "s", deep: { n: 1 } });
      expect((await s.getValue(sessionValue("sess.name")))?.value).toEqual({ nested: { n: 1 } });
    });

    it(t("after close every read and commit rejects with closed"), async () => {
      const a = await main((tx) => tx.conversation());
      await s.close();
      const calls: [string, () => Promise<unknown>][] = [
        ["commit", () => s.commit({ kind: "main", writes: [] })],
        ["getConversations", () => s.getConversations([a])],
        ["scanConversations", () => s.scanConversations({ limit: 1 })],
        ["getEntries", () => s.getEntries([a])],
        ["scanEntries", () => s.scanEntries({ conversationId: a, limit: 1 })],
        ["newestHead", () => s.newestHead(a, MAX)],
        ["entryKinds", () => s.entryKinds()],
        ["getTasks", () => s.getTasks([a])],
        ["scanTasks", () => s.scanTasks({ limit: 1 })],
        ["getValue", () => s.getValue(sessionValue("sess.name"))],
        ["scanValues", () => s.scanValues({ scope: { session: true }, namespace: "sess.name", limit: 1 })],
        ["readList", () => s.readList(sessionList("sess.inbox"), { limit: 1 })],
      ];
      const codes: Record<string, string> = {};
      for (const [name, call] of calls) {
        codes[name] = await call().then(
          () => "resolved",
          (error: unknown) => (error instanceof StorageError ? error.code : String(error)),
        );
      }
      expect(codes).toEqual(Object.fromEntries(calls.map(([name]) => [name, "closed"])));
      if (durable) {
        await reopen("crash");
        expect((await s.getConversations([a])).has(a)).toBe(true);
      }
    });
  });
}
