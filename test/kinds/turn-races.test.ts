/**
 * The §10.2 failure and concurrency rows of the agent turn (§5.5, §6.3, §8.1-§8.4) with the real turn
 * kinds and pi-ai's faux provider, on memory and SQLite. Every race runs in both orders, steered with
 * hooks that run at a precise point of an invocation, commit listeners (which run on the line, so a
 * commit they issue queues right behind the observed one), storage barriers and held streams.
 */
import { describe, expect, it } from "vitest";
import { noticeKind, type EntryInput, type NoticeEntry } from "../../src/core/entries.js";
import { TaskCancelled } from "../../src/core/errors.js";
import { bindInbox } from "../../src/core/inbox.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { outcome, until } from "../core/driver-fixtures.js";
import {
  answerNewest,
  call,
  inputsOf,
  callsMessage,
  crashAndReopen,
  deferred,
  deferredStep,
  fauxAssistantMessage,
  kinds,
  lateStream,
  liveTasks,
  openRig,
  resultOf,
  settles,
  taskOf,
  tasksOfKind,
  terminalWrites,
  transcript,
  type Deferred,
  type TurnRig,
} from "./turn-race-fixtures.js";
import type { AnyTool } from "../../src/kinds/services.js";
import type { FauxResponseStep } from "@earendil-works/pi-ai";

function gated(gate: Deferred, prefix = "answer"): FauxResponseStep {
  const answer = answerNewest(prefix);
  return async (context, options, state, model) => {
    await gate.promise;
    return answer(context, options, state, model);
  };
}

async function firstOfKind(rig: TurnRig, kind: string): Promise<Id> {
  const id = (await tasksOfKind(rig, kind))[0]?.id;
  if (id === undefined) throw new Error(`no ${kind} task`);
  return id;
}

async function queuedIds(rig: TurnRig, conversationId: Id = rig.root): Promise<Id[]> {
  return (await rig.storage.inner.readList(bindInbox(conversationId), { limit: 100 })).items.map((e) => e.id);
}

/** After the run: no live task, and no live task was ever left unmarked after the abort (checked by callers). */
async function nothingLive(rig: TurnRig): Promise<void> {
  expect(await liveTasks(rig)).toEqual([]);
}

/** A second conversation configured like the root. */
async function configured(rig: TurnRig): Promise<Id> {
  const id = await rig.harness.commit((tx) => tx.createConversation({}), call);
  const handle = await rig.harness.conversation(id, call);
  await handle?.commit((tx) => {
    tx.value(generationConfig.model).set(rig.modelId);
    tx.value(generationConfig.selectedTools).set(["echo"]);
  }, call);
  return id;
}

for (const backend of coreBackends) {
  describe(`turn §10.2 (${backend.name})`, () => {
    // -------------------------------------------------------------------------------------------
    it(`§10.2 Post-mark main/scratch write — a generation marked mid-stream: its next scratch flush rejects before the builder, the flusher unwinds, abort keeps only pre-mark frames (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = lateStream(["one ", "two "], ["three ", "four"]);
        const rig = await openRig(inner, [stream]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await stream.streamed.promise;
        const gen = await firstOfKind(rig, "generation");
        const framed = (): string =>
          rig.commits
            .flatMap((c) => (c.batch.kind === "scratch" && c.batch.task === gen ? c.batch.writes : []))
            .map((w) => (w.type === "list.append" ? JSON.stringify(w.value) : ""))
            .join("");
        await until(rig.harness, () => framed().includes("two"), "both frames flushed");
        await rig.harness.abortTask(gen, call);
        const markedAt = rig.commits.length;
        stream.release.resolve(); // the provider keeps streaming after the mark
        expect(await driving).toBe("idle");
        // No scratch batch of the generation reached storage after the mark; its settlement was the abort's.
        const after = rig.commits.slice(markedAt);
        expect(after.some((c) => c.batch.kind === "scratch" && c.batch.task === gen)).toBe(false);
        const state = (await taskOf(rig, gen)).state as { status: string; partial: Id | null };
        expect(state.status).toBe("aborted");
        const partial = (await transcript(rig)).find((e) => e.id === state.partial);
        expect(partial?.model).toMatchObject([
          { role: "assistant", stopReason: "aborted", content: [{ type: "text", text: "one two " }] },
        ]);
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
        expect(await tasksOfKind(rig, "tool")).toEqual([]);
        expect(rig.harness.fault).toBeUndefined();
        // Scratch is retired with the settlement.
        expect(
          (
            await rig.storage.inner.readList(
              { scope: { scratch: gen }, namespace: "frames", rewind: false },
              { limit: 10 },
            )
          ).items,
        ).toEqual([]);
      }));

    it(`§10.2 Post-mark main/scratch write — marked after the stream, before settlement: the final-answer commit rejects before its builder; the input resolves aborted once (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [fauxAssistantMessage("complete answer")]);
        const root = await rig.harness.root(call);
        const seen: unknown[] = [];
        rig.kit.hooks.on(rig.kit.generation, "after_response", async () => {
          const gen = await firstOfKind(rig, "generation");
          await rig.harness.abortTask(gen, call);
        });
        rig.kit.hooks.on(rig.kit.generation, "on_yield", async (_input, c) => {
          seen.push(c.abortSignal?.aborted);
          return {};
        });
        const a = await root.accept({ input: "A" }, call);
        expect(await root.drive(call)).toBe("idle");
        const gen = await firstOfKind(rig, "generation");
        const state = (await taskOf(rig, gen)).state as { status: string; partial: Id | null };
        expect(state.status).toBe("aborted");
        // The only assistant entry is the partial for display (aborted), never a settled answer.
        const assistants = (await transcript(rig)).filter((e) => e.kind === "assistant");
        expect(assistants.map((e) => (e.model?.[0] as { stopReason: string }).stopReason)).toEqual(
          assistants.length === 0 ? [] : ["aborted"],
        );
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
        expect(terminalWrites(rig, a.inputId)).toBe(1);
        expect(rig.harness.fault).toBeUndefined();
        // on_yield ran once, after the mark: the call it got was already cancelled (the mark landed
        // between the stream and the settlement, which is the race this test is about).
        expect(seen).toEqual([true]);
      }));

    it(`§10.2 Post-mark main/scratch write — settlement first: a later mark rejects (terminal) and the answer stands (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [fauxAssistantMessage("complete answer")]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        expect(await root.drive(call)).toBe("idle");
        const gen = await firstOfKind(rig, "generation");
        const late = await outcome(rig.harness.abortTask(gen, call));
        expect(late.ok).toBe(false);
        expect((await taskOf(rig, gen)).state.status).toBe("done");
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "done" });
      }));

    // -------------------------------------------------------------------------------------------
    it(`§10.2 Known dependency self-drive — a tool prompting or driving its own conversation is rejected before acceptance (${backend.name})`, () =>
      backend.run(async (inner) => {
        const codes: Record<string, string> = {};
        const selfish: AnyTool = {
          name: "selfish",
          description: "drives its own conversation",
          parameters: { type: "object", properties: {} },
          async execute(_id, _params, out, runtime, c) {
            const own = await runtime.conversation(runtime.conversationId, c);
            const code = (p: Promise<unknown>): Promise<string> =>
              p.then(
                () => "ok",
                (e: unknown) => String((e as { code?: string }).code),
              );
            codes["prompt"] = await code(own!.prompt({ input: "again", requestId: "self-prompt" }, c));
            codes["drive"] = await code(own!.drive(c));
            codes["session"] = await code(own!.harness.drive(c));
            out.write("tried");
          },
        };
        const rig = await openRig(inner, [callsMessage("selfish"), answerNewest()], { tools: [selfish] });
        const root = await rig.harness.root(call);
        await root.prompt({ input: "A" }, call);
        expect(codes).toEqual({ prompt: "contract", drive: "contract", session: "contract" });
        // Rejected before acceptance: nothing queued, no request key, one generation pair only.
        expect(await queuedIds(rig)).toEqual([]);
        expect(await rig.harness.acceptance("self-prompt", call)).toBeUndefined();
        expect((await tasksOfKind(rig, "generation")).length).toBe(2);
        expect(await kinds(rig)).toEqual(["user", "assistant", "tool_result", "assistant"]);
      }));

    // -------------------------------------------------------------------------------------------
    it(`§10.2 Accept commit durable, reply lost — after a crash, acceptance(requestId) names the original input and a retry returns it without writing (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate)]);
        const root = await rig.harness.root(call);
        // The reply is lost: the process dies right after the accept commit is durable.
        let lost: Id | undefined;
        rig.harness.onCommit((c) => {
          if (
            lost === undefined &&
            c.batch.kind === "main" &&
            c.batch.writes.some((w) => w.type === "task" && w.task.kind === "generation")
          ) {
            lost = c.first;
            rig.storage.crash();
          }
        });
        await outcome(root.accept({ input: "A", requestId: "req-1" }, call));
        gate.resolve();
        const again = await crashAndReopen(rig);
        const acceptance = await again.harness.acceptance("req-1", call);
        expect(acceptance).toMatchObject({ requestId: "req-1", conversationId: again.root });
        const inputId = acceptance?.inputId as Id;
        const seq = again.storage.lastSeq;
        const retry = await (await again.harness.root(call)).accept({ input: "A (retried)", requestId: "req-1" }, call);
        expect(retry).toMatchObject({ inputId, status: "duplicate" });
        expect(again.storage.lastSeq).toBe(seq);
        again.provider.push(answerNewest());
        // The original acceptance's generation runs (recover after the crash) — the retry started none.
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        expect((await tasksOfKind(again, "generation")).filter((t) => inputsOf(t).includes(inputId)).length).toBe(1);
        expect((await kinds(again)).filter((k) => k === "user")).toEqual(["user"]);
      }));

    it(`§10.2 Accept commit durable, reply lost — two concurrent accepts with one key: one acceptance, the same inputId, one generation (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [answerNewest()]);
        const root = await rig.harness.root(call);
        const [first, second] = await Promise.all([
          root.accept({ input: "A", requestId: "req-2" }, call),
          root.accept({ input: "A", requestId: "req-2" }, call),
        ]);
        expect(second.inputId).toBe(first.inputId);
        expect([first.status, second.status]).toEqual(["placed", "duplicate"]);
        expect((await root.prompt({ input: "A", requestId: "req-2" }, call))?.kind).toBe("assistant");
        expect((await tasksOfKind(rig, "generation")).length).toBe(1);
        expect(await rig.harness.acceptance("req-2", call)).toEqual({
          requestId: "req-2",
          conversationId: rig.root,
          inputId: first.inputId,
        });
      }));

    // -------------------------------------------------------------------------------------------
    for (const order of ["accept first", "shutdown first"] as const) {
      it(`§10.2 Shutdown vs accept / idle nextRun inbox — ${order}: ${order === "accept first" ? "the accepted generation is marked by the batch and aborts" : "the accept rejects"}; queued items and results are preserved (${backend.name})`, () =>
        backend.run(async (inner) => {
          const gate = deferred();
          const rig = await openRig(inner, [gated(gate)]);
          const root = await rig.harness.root(call);
          const x = await configured(rig);
          const y = await configured(rig);
          const yHandle = (await rig.harness.conversation(y, call))!;
          const n = await yHandle.queueInput({ mode: "nextRun", input: "N" }, call); // idle conversation
          const a = await root.accept({ input: "A" }, call);
          void rig.harness.attach(call);
          await until(rig.harness, () => rig.provider.calls > 0, "root streaming");
          const f = await root.accept({ input: "F" }, call); // busy: queued followUp
          const w = await root.queueInput({ mode: "nextRun", input: "W" }, call);
          const xHandle = (await rig.harness.conversation(x, call))!;
          let accepted: Awaited<ReturnType<typeof outcome<{ inputId: Id }>>>;
          let shutdown: Promise<void>;
          if (order === "accept first") {
            const hit = rig.storage.pause();
            const accepting = outcome(xHandle.accept({ input: "B", requestId: "b" }, call));
            await hit;
            shutdown = rig.harness.shutdown(call); // queues behind the held accept commit
            rig.storage.resume();
            accepted = await accepting;
          } else {
            shutdown = rig.harness.shutdown(call);
            accepted = await outcome(xHandle.accept({ input: "B", requestId: "b" }, call));
          }
          gate.resolve();
          await shutdown;
          if (order === "accept first") {
            expect(accepted.ok).toBe(true);
            const b = (accepted as { value: { inputId: Id } }).value.inputId;
            const genX = (await tasksOfKind(rig, "generation")).find((t) => t.conversationId === x);
            expect(genX?.abort).toBe(true);
            expect(genX?.state.status).toBe("aborted");
            expect(await resultOf(rig, b, x)).toMatchObject({ status: "unanswered", reason: "aborted" });
          } else {
            expect(accepted.ok).toBe(false);
            expect(
              await rig.storage.inner.getValue({
                scope: { session: true },
                namespace: "pi.request",
                key: "b",
                rewind: false,
              }),
            ).toBeUndefined();
            expect((await tasksOfKind(rig, "generation")).some((t) => t.conversationId === x)).toBe(false);
          }
          expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
          // Shutdown drains no inbox: queued items and their queued results stay, busy or idle.
          expect(await queuedIds(rig)).toEqual([f.inputId, w.inputId]);
          expect(await resultOf(rig, f.inputId)).toEqual({ status: "queued" });
          expect(await resultOf(rig, w.inputId)).toEqual({ status: "queued" });
          expect(await queuedIds(rig, y)).toEqual([n.inputId]);
          expect(await resultOf(rig, n.inputId, y)).toEqual({ status: "queued" });
          // Reopen: preserved queues create no work by inference; a later acceptance places them.
          const again = await crashAndReopen(rig);
          expect((await again.harness.inspect(call)).start).toEqual([]);
          again.provider.push(answerNewest());
          const c = await (await again.harness.conversation(y, call))!.accept({ input: "C" }, call);
          expect(await (await again.harness.conversation(y, call))!.drive(call)).toBe("idle");
          const answer = await resultOf(again, c.inputId, y);
          expect(answer).toMatchObject({ status: "done" });
          expect(await resultOf(again, n.inputId, y)).toMatchObject({
            status: "done",
            answer: (answer as { answer: Id }).answer,
          });
        }));
    }

    // -------------------------------------------------------------------------------------------
    for (const order of ["reset while summarizing", "summary first"] as const) {
      it(`§10.2 Summary lands after a competing head/reset — ${order}: ${order === "summary first" ? "the summary lands, the reset follows" : "rejected as stale, no summary entry"} (${backend.name})`, () =>
        backend.run(async (inner) => {
          const gate = deferred();
          const rig = await openRig(
            inner,
            [
              answerNewest("1"),
              answerNewest("2"),
              answerNewest("3"),
              deferredStep(gate, fauxAssistantMessage("SUMMARY")),
            ],
            {
              turn: { collapseKeepEntries: 2 },
            },
          );
          const root = await rig.harness.root(call);
          for (const text of ["one", "two", "three"]) await root.prompt({ input: text }, call);
          const collapse = await root.collapse(undefined, call);
          await until(rig.harness, () => rig.provider.calls === 4, "the summarizer request");
          if (order === "reset while summarizing") {
            await root.reset(undefined, call);
            gate.resolve();
            await rig.harness.driver.waitForTask(collapse, undefined, call);
            const state = (await taskOf(rig, collapse)).state as { status: string; error?: string };
            expect(state.status).toBe("failed");
            expect(state.error).toMatch(/stale/);
            expect((await kinds(rig)).includes("summary")).toBe(false);
          } else {
            gate.resolve();
            await rig.harness.driver.waitForTask(collapse, undefined, call);
            await root.reset(undefined, call);
            expect((await taskOf(rig, collapse)).state.status).toBe("done");
            expect((await kinds(rig)).slice(-2)).toEqual(["summary", "reset"]);
          }
        }));
    }

    it(`§10.2 Summary lands after a competing head/reset — intervening edits and a turn that answers meanwhile do not stale it (${backend.name})`, () =>
      backend.run(async (inner) => {
        const turnGate = deferred();
        const summaryGate = deferred();
        const rig = await openRig(
          inner,
          [
            answerNewest("1"),
            answerNewest("2"),
            answerNewest("3"),
            gated(turnGate, "4"),
            deferredStep(summaryGate, fauxAssistantMessage("SUMMARY")),
          ],
          { turn: { collapseKeepEntries: 2 } },
        );
        const root = await rig.harness.root(call);
        for (const text of ["one", "two", "three"]) await root.prompt({ input: text }, call);
        const four = await root.accept({ input: "four" }, call);
        const driving = root.drive(call);
        await until(rig.harness, () => rig.provider.calls === 4, "turn four streaming");
        const collapse = await root.collapse(undefined, call);
        await until(rig.harness, () => rig.provider.calls === 5, "the summarizer request");
        const target = (await transcript(rig)).find((e) => e.kind === "assistant")?.id as Id;
        await root.commit(
          (tx) =>
            tx.entry(noticeKind, {
              data: { note: "edit" },
              edits: [{ target, action: "omit" }],
            } as unknown as EntryInput<NoticeEntry>),
          call,
        );
        turnGate.resolve();
        expect(await driving).toBe("idle");
        expect(await resultOf(rig, four.inputId)).toMatchObject({ status: "done" });
        summaryGate.resolve();
        await rig.harness.driver.waitForTask(collapse, undefined, call);
        const state = (await taskOf(rig, collapse)).state as { status: string; summary?: Id };
        expect(state.status).toBe("done");
        expect((await transcript(rig)).find((e) => e.id === state.summary)?.kind).toBe("summary");
        // The turn's entries landed after the retained boundary: they stay in context after the summary.
        const context = await root.contextEntries(undefined, call);
        const answered = (await resultOf(rig, four.inputId)) as { entry: Id; answer: Id };
        const ids = context.items.map((i) => i.entry.id);
        expect(ids).toContain(answered.entry);
        expect(ids).toContain(answered.answer);
        expect(context.head?.id).toBe(state.summary);
      }));

    // -------------------------------------------------------------------------------------------
    for (const order of ["withdraw first", "land first"] as const) {
      it(`§10.2 Withdraw vs land of the same inbox item — ${order}: one wins on the line; one terminal input result (${backend.name})`, () =>
        backend.run(async (inner) => {
          const rig = await openRig(inner, [fauxAssistantMessage("first"), answerNewest("second")]);
          const root = await rig.harness.root(call);
          let f: Id | undefined;
          let withdrawn: Promise<"aborted" | "not_found"> | undefined;
          rig.kit.hooks.on(rig.kit.generation, "on_yield", async () => {
            if (withdrawn !== undefined || f === undefined) return {};
            if (order === "withdraw first") {
              withdrawn = root.abortInput(f, call);
              await withdrawn;
            } else {
              // Hold the final-answer commit at the barrier; the withdrawal queues behind it on the line.
              const hit = rig.storage.pause();
              void hit.then(() => {
                withdrawn = root.abortInput(f as Id, call);
                setTimeout(() => rig.storage.resume(), 0);
              });
            }
            return {};
          });
          const a = await root.accept({ input: "A" }, call);
          f = (await root.queueInput({ mode: "followUp", input: "F" }, call)).inputId;
          expect(await root.drive(call)).toBe("idle");
          const result = await withdrawn;
          expect(await root.drive(call)).toBe("idle");
          if (order === "withdraw first") {
            expect(result).toBe("aborted");
            expect(await resultOf(rig, f)).toEqual({ status: "unanswered", reason: "aborted" });
            expect((await tasksOfKind(rig, "generation")).length).toBe(1);
          } else {
            expect(result).toBe("not_found");
            expect(await resultOf(rig, f)).toMatchObject({ status: "done" });
            expect((await tasksOfKind(rig, "generation")).length).toBe(2);
          }
          expect(terminalWrites(rig, f)).toBe(1);
          expect(terminalWrites(rig, a.inputId)).toBe(1);
          expect(await queuedIds(rig)).toEqual([]);
        }));
    }

    // -------------------------------------------------------------------------------------------
    for (const point of [
      "mark before the generation's calls settlement",
      "generation settles first",
      "post_tools settles first",
      "mark before post_tools",
    ] as const) {
      it(`§10.2 Abort vs generation/post_tools group transfer — ${point}: every active input resolves once; no unmarked owner escapes (${backend.name})`, () =>
        backend.run(async (inner) => {
          const rig = await openRig(inner, [callsMessage("echo", "echo"), answerNewest()]);
          const root = await rig.harness.root(call);
          let aborting: Promise<void> | undefined;
          let abortedAt = -1;
          const abort = (): void => {
            if (aborting !== undefined) return;
            abortedAt = rig.commits.length;
            aborting = root.abort(call);
          };
          if (point === "mark before the generation's calls settlement") {
            rig.kit.hooks.on(rig.kit.generation, "after_response", async () => {
              abort();
              await aborting;
              return undefined;
            });
          }
          rig.harness.onCommit((c) => {
            if (c.batch.kind !== "main") return;
            const settled = c.batch.writes.filter((w) => w.type === "settle").map((w) => (w as { id: Id }).id);
            for (const id of settled) {
              const kind = c.batch.writes.length > 0 ? kindOf(rig, id) : undefined;
              if (point === "generation settles first" && kind === "generation") abort();
              if (point === "post_tools settles first" && kind === "post_tools") abort();
            }
            if (
              point === "mark before post_tools" &&
              rig.commits.filter(
                (x) =>
                  x.batch.kind === "main" &&
                  x.batch.writes.some((w) => w.type === "settle" && kindOf(rig, w.id) === "tool"),
              ).length === 2
            )
              abort();
          });
          const n = await root.queueInput({ mode: "nextRun", input: "N" }, call);
          const a = await root.accept({ input: "A" }, call);
          const s = await root.accept({ input: "S", whenBusy: "steer" }, call);
          expect(await root.drive(call)).toBe("idle");
          await aborting;
          expect(aborting).toBeDefined();
          await nothingLive(rig);
          for (const id of [n.inputId, a.inputId, s.inputId]) {
            expect(terminalWrites(rig, id)).toBe(1);
            expect(await resultOf(rig, id)).toMatchObject({ status: "unanswered", reason: "aborted" });
          }
          // No owner created after the abort committed escaped the mark: every task created later is marked.
          for (const c of rig.commits.slice(abortedAt)) {
            if (c.batch.kind !== "main") continue;
            for (const w of c.batch.writes)
              if (w.type === "task") expect((await taskOf(rig, w.task.id)).abort).toBe(true);
          }
          const generations = await tasksOfKind(rig, "generation");
          expect(generations.every((t) => t.state.status !== "done" || t.abort !== true)).toBe(true);
          expect(await queuedIds(rig)).toEqual([]);
        }));
    }

    // -------------------------------------------------------------------------------------------
    it(`§10.2 Several inputs share one generation — nextRun items, the accept and a steer joined at post_tools all point to the same final answer entry (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [deferredStep(gate, callsMessage("echo")), answerNewest()]);
        const root = await rig.harness.root(call);
        const n1 = await root.queueInput({ mode: "nextRun", input: "N1" }, call);
        const n2 = await root.queueInput({ mode: "nextRun", input: "N2" }, call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await until(rig.harness, () => rig.provider.calls > 0, "streaming");
        const s = await root.accept({ input: "S", whenBusy: "steer" }, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        const results = await Promise.all([n1, n2, a, s].map((r) => resultOf(rig, r.inputId)));
        const answers = new Set(results.map((r) => (r?.status === "done" ? r.answer : undefined)));
        expect(answers.size).toBe(1);
        const answer = [...answers][0] as Id;
        expect((await transcript(rig)).find((e) => e.id === answer)?.kind).toBe("assistant");
        const generations = await tasksOfKind(rig, "generation");
        expect(generations.map((g) => inputsOf(g))).toEqual([
          [n1.inputId, n2.inputId, a.inputId],
          [n1.inputId, n2.inputId, a.inputId, s.inputId],
        ]);
      }));

    // -------------------------------------------------------------------------------------------
    for (const order of ["collapse completes", "abort while the collapse runs"] as const) {
      it(`§10.2 Overflow retry while collapse runs — ${order}: no live task waits on the collapse (${backend.name})`, () =>
        backend.run(async (inner) => {
          const gate = deferred();
          const rig = await openRig(
            inner,
            [
              answerNewest("1"),
              answerNewest("2"),
              fauxAssistantMessage([], {
                stopReason: "error",
                errorMessage: "prompt is too long: 213462 tokens > 200000 maximum",
              }),
              deferredStep(gate, fauxAssistantMessage("SUMMARY")),
              answerNewest("3"),
            ],
            { turn: { collapseKeepEntries: 2 } },
          );
          const root = await rig.harness.root(call);
          await root.prompt({ input: "one" }, call);
          await root.prompt({ input: "two" }, call);
          const a = await root.accept({ input: "three" }, call);
          const driving = root.drive(call);
          await until(rig.harness, () => rig.provider.calls === 4, "the summarizer request");
          const live = await liveTasks(rig);
          expect(live.map((t) => t.kind)).toEqual(["collapse"]);
          const collapse = live[0]?.id as Id;
          expect(live[0]?.background).toBeUndefined();
          const all = (await rig.storage.inner.scanTasks({ limit: 1000 })).items;
          expect(all.filter((t) => t.after.includes(collapse))).toEqual([]);
          const overflowed = (await tasksOfKind(rig, "generation"))[2];
          expect(overflowed?.state).toMatchObject({ status: "failed", reason: "overflow", successor: collapse });
          if (order === "collapse completes") {
            gate.resolve();
            expect(await driving).toBe("idle");
            const state = (await taskOf(rig, collapse)).state as { status: string; successor: Id };
            expect(state.status).toBe("done");
            expect((await taskOf(rig, state.successor)).state).toMatchObject({
              status: "done",
              inputs: [a.inputId],
              attempt: 2,
            });
            expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "done" });
          } else {
            await root.abort(call);
            gate.resolve();
            expect(await driving).toBe("idle");
            expect((await taskOf(rig, collapse)).state.status).toBe("aborted");
            expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
            expect((await tasksOfKind(rig, "generation")).length).toBe(3);
          }
          expect(terminalWrites(rig, a.inputId)).toBe(1);
          await nothingLive(rig);
        }));
    }
  });
}

const kindCache = new WeakMap<TurnRig, Map<Id, string>>();

/** The kind of a task created in a recorded commit (synchronous: from the commit log). */
function kindOf(rig: TurnRig, id: Id): string | undefined {
  let map = kindCache.get(rig);
  if (map === undefined) kindCache.set(rig, (map = new Map()));
  if (!map.has(id)) {
    for (const c of rig.commits) {
      if (c.batch.kind !== "main") continue;
      for (const w of c.batch.writes) if (w.type === "task") map.set(w.task.id, w.task.kind);
    }
  }
  return map.get(id);
}

function textOfAnswer(entry: { readonly model?: readonly unknown[] } | undefined): string {
  const content = (entry?.model?.[0] as { content?: { type: string; text?: string }[] } | undefined)?.content ?? [];
  return content.map((c) => c.text ?? "").join("");
}

export { TaskCancelled, settles };
