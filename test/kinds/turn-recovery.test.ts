/**
 * Turn recovery and outcomes (§5.5, §8.2, §8.4): the crash points of §5.5 (a new Harness over the same
 * storage at each point, then drive), retry after a retryable error on a fake clock, overflow ->
 * collapse -> next generation, and usage rows/totals per attempt (unknown counted as unknown), on
 * memory and SQLite with the faux provider.
 */
import type { Context } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { bindTo } from "../../src/core/state.js";
import { previewOf, watchConversation } from "../../src/core/watch.js";
import { turnPolicy } from "../../src/kinds/config.js";
import { continueInbox } from "../../src/kinds/placement.js";
import { waitingConversations, waitingInputs } from "../../src/kinds/waiting.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { FakeClock, until } from "../core/driver-fixtures.js";
import {
  answerNewest,
  call,
  callsMessage,
  crashAndReopen,
  fauxAssistantMessage,
  heldStream,
  inputsOf,
  kinds,
  openRig,
  resultOf,
  settles,
  taskOf,
  tasksOfKind,
  totals,
  transcript,
  usageRows,
  type TurnRig,
} from "./turn-race-fixtures.js";

async function generations(rig: TurnRig): Promise<{ id: Id; status: string }[]> {
  return (await tasksOfKind(rig, "generation")).map((t) => ({ id: t.id, status: t.state.status }));
}

for (const backend of coreBackends) {
  describe(`turn crash points (§5.5) (${backend.name})`, () => {
    it(`crash before the generation settles (no frames on disk) -> the generation is live; recover retries within the budget and answers (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream();
        const rig = await openRig(inner, [stream, answerNewest()]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        const again = await crashAndReopen(rig);
        stream.release.resolve(); // the dead process's stream ends; its commits go nowhere
        const [gen] = await generations(again);
        expect(gen?.status).toBe("streaming");
        expect((await again.harness.inspect(call)).inflight.map((t) => t.id)).toEqual([gen?.id]);
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        const state = (await taskOf(again, gen?.id as Id)).state as { status: string; attempt: number };
        expect(state.status).toBe("done");
        expect(state.attempt).toBe(2); // the interrupted attempt counts against the shared budget
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done" });
        expect(await kinds(again)).toEqual(["user", "assistant"]);
      }));

    it(`onInterrupt "retry" (default): crash mid-stream with frames on disk -> the partial is kept for display (excluded from requests), the attempt runs again within its budget and the group goes on to its final answer, then the queued steer and followUp (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream("partial ", "answer");
        const seen: Context[] = [];
        const rig = await openRig(inner, [stream]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        await until(
          rig.harness,
          () =>
            rig.commits.some((c) => c.batch.kind === "scratch" && JSON.stringify(c.batch.writes).includes("answer")),
          "frames flushed",
        );
        const f = await root.queueInput({ mode: "followUp", input: "F" }, call);
        const s = await root.queueInput({ mode: "steer", input: "S" }, call);
        const again = await crashAndReopen(rig);
        stream.release.resolve();
        again.provider.push((context) => {
          seen.push(context);
          return fauxAssistantMessage("answer: A");
        });
        again.provider.push(answerNewest(), answerNewest());
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        const gens = await tasksOfKind(again, "generation");
        const first = gens[0]?.state as { status: string; attempt: number; assistant: Id };
        expect(first).toMatchObject({ status: "done", attempt: 2 }); // the interrupted attempt counts
        // The partial stays in the transcript for display; the retried request does not replay it.
        const entries = await transcript(again);
        const partial = entries.find(
          (e) => e.kind === "assistant" && JSON.stringify(e.model).includes('"stopReason":"aborted"'),
        );
        expect(partial?.model).toMatchObject([
          { role: "assistant", stopReason: "aborted", content: [{ type: "text", text: "partial answer" }] },
        ]);
        expect(seen[0]?.messages.filter((m) => m.role === "assistant")).toEqual([]);
        // The long input is answered once; the steer and followUp go into the next group after it (§8.1).
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done", answer: first.assistant });
        expect(await resultOf(again, s.inputId)).toMatchObject({ status: "done" });
        expect(await resultOf(again, f.inputId)).toMatchObject({ status: "done" });
        expect((await usageRows(again)).filter((r) => r.taskId === gens[0]?.id).map((r) => r.usage === null)).toEqual([
          true,
          false,
        ]);
      }));

    it(`preview.init on reopen (§9.4): a generation interrupted mid-stream with frames on scratch, reopened -> before any new token a watcher's view.previews holds the partial text from the frames (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream("partial ", "answer");
        const rig = await openRig(inner, [stream]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        await until(
          rig.harness,
          () =>
            rig.commits.some((c) => c.batch.kind === "scratch" && JSON.stringify(c.batch.writes).includes("answer")),
          "frames flushed",
        );
        const again = await crashAndReopen(rig);
        stream.release.resolve();
        const [gen] = await generations(again);
        const retried = heldStream(); // the retried attempt streams no token until released
        again.provider.push(retried, answerNewest());
        const watch = await watchConversation(again.harness, again.root, { tail: 10 }, call);
        const previews: unknown[] = [];
        watch.start((e) => {
          if (e.type === "task_output" && e.task === gen?.id)
            previews.push(JSON.parse(JSON.stringify(previewOf(watch.view, e.task))));
        });
        const driving = (await again.harness.root(call)).drive(call);
        await retried.streamed.promise;
        // The first preview the reopened invocation shows is the base rebuilt from the frames; the retry
        // cleared them (its partial is an entry now) and starts its own preview empty.
        expect(previews[0]).toEqual({ content: [{ type: "text", text: "partial answer" }] });
        retried.release.resolve();
        expect(await driving).toBe("idle");
        watch.unsubscribe();
      }));

    it(`onInterrupt "retry" with its budget spent: an interruption on the last attempt settles failed(interrupted) (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream("partial ", "answer");
        const rig = await openRig(inner, [stream], { turn: { maxAttempts: 1 } });
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        await until(
          rig.harness,
          () =>
            rig.commits.some((c) => c.batch.kind === "scratch" && JSON.stringify(c.batch.writes).includes("answer")),
          "frames flushed",
        );
        const again = await crashAndReopen(rig, { turn: { maxAttempts: 1 } });
        stream.release.resolve();
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        expect((await tasksOfKind(again, "generation"))[0]?.state).toMatchObject({
          status: "failed",
          reason: "interrupted",
          retry: { attempt: 1 },
        });
        expect(await resultOf(again, a.inputId)).toMatchObject({
          status: "unanswered",
          reason: "failed",
          detail: "interrupted by a restart",
        });
        expect(again.provider.calls).toBe(1); // only the interrupted attempt
      }));

    it(`onInterrupt "fail": crash mid-stream with frames on disk -> recover keeps the partial for display (aborted, excluded from requests), no tools, input unanswered(failed) (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream("partial ", "answer");
        const rig = await openRig(inner, [stream]);
        const root = await rig.harness.root(call);
        await root.commit((tx) => tx.value(turnPolicy.onInterrupt).set("fail"), call);
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        await until(
          rig.harness,
          () =>
            rig.commits.some((c) => c.batch.kind === "scratch" && JSON.stringify(c.batch.writes).includes("answer")),
          "frames flushed",
        );
        const seen: Context[] = [];
        const again = await crashAndReopen(rig);
        stream.release.resolve();
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        const gen = (await tasksOfKind(again, "generation"))[0];
        const state = gen?.state as { status: string; reason: string; partial: Id };
        expect(state).toMatchObject({ status: "failed", reason: "interrupted" });
        const partial = (await transcript(again)).find((e) => e.id === state.partial);
        expect(partial?.model).toMatchObject([
          { role: "assistant", stopReason: "aborted", content: [{ type: "text", text: "partial answer" }] },
        ]);
        expect(await tasksOfKind(again, "tool")).toEqual([]);
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "unanswered", reason: "failed" });
        // The partial is display-only: the next request does not replay it.
        again.provider.push((context) => {
          seen.push(context);
          return fauxAssistantMessage("fine");
        });
        await (await again.harness.root(call)).prompt({ input: "B" }, call);
        const replayed = seen[0]?.messages.filter((m) => m.role === "assistant") ?? [];
        expect(replayed).toEqual([]);
      }));

    it(`crash right after the generation settles with calls -> assistant, tools and post_tools exist; nothing to repair; drive finishes the turn (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [callsMessage("echo", "echo"), answerNewest()]);
        const root = await rig.harness.root(call);
        let gen: Id | undefined;
        rig.harness.onCommit((c) => {
          if (gen !== undefined && settles(c, gen)) rig.storage.crash();
        });
        const a = await root.accept({ input: "A" }, call);
        gen = (await tasksOfKind(rig, "generation"))[0]?.id;
        void root.drive(call).catch(() => undefined);
        await until(rig.harness, () => rig.storage.closed, "the crash");
        const again = await crashAndReopen(rig);
        const seq = again.storage.lastSeq;
        expect(await kinds(again)).toEqual(["user", "assistant"]);
        const tools = await tasksOfKind(again, "tool");
        const post = await tasksOfKind(again, "post_tools");
        expect(tools.map((t) => t.state.status)).toEqual(["planned", "planned"]);
        expect(post.map((t) => [t.state.status, inputsOf(t)])).toEqual([["waiting", [a.inputId]]]);
        expect(post[0]?.after).toEqual(tools.map((t) => t.id));
        expect(again.storage.lastSeq).toBe(seq); // open repaired nothing
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        expect(await kinds(again)).toEqual(["user", "assistant", "tool_result", "tool_result", "assistant"]);
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done" });
      }));

    it(`crash right after the last tool settles -> post_tools exists and is startable; nothing to infer (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [callsMessage("echo", "echo"), answerNewest()]);
        const root = await rig.harness.root(call);
        let settledTools = 0;
        rig.harness.onCommit((c) => {
          if (c.batch.kind !== "main") return;
          for (const w of c.batch.writes)
            if (w.type === "settle" && (w.state as { output?: unknown }).output !== undefined) settledTools += 1;
          if (settledTools === 2 && !rig.storage.closed) rig.storage.crash();
        });
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await until(rig.harness, () => rig.storage.closed, "the crash");
        const again = await crashAndReopen(rig);
        const post = (await tasksOfKind(again, "post_tools"))[0];
        expect(post?.state.status).toBe("waiting");
        expect((await tasksOfKind(again, "tool")).map((t) => t.state.status)).toEqual(["done", "done"]);
        expect((await again.harness.inspect(call)).start.map((t) => t.id)).toEqual([post?.id]);
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        expect((await taskOf(again, post?.id as Id)).state.status).toBe("done");
        expect(await kinds(again)).toEqual(["user", "assistant", "tool_result", "tool_result", "assistant"]);
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done" });
      }));
  });

  describe(`waiting input (DESIGN §3, §8.1) (${backend.name})`, () => {
    it(`a group that ends without a final answer marks its queued steer/followUp waiting (conversation and session values); continue places them into a new group with one commit and clears the marks (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [
          fauxAssistantMessage([], { stopReason: "error", errorMessage: "400 bad request" }),
        ]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const f = await root.queueInput({ mode: "followUp", input: "F" }, call);
        const s = await root.queueInput({ mode: "steer", input: "S" }, call);
        const n = await root.queueInput({ mode: "nextRun", input: "N" }, call);
        expect(await root.drive(call)).toBe("idle");
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "unanswered", reason: "failed" });
        // Still queued (§8.1: failure does not consume them), and now visibly waiting.
        expect(await resultOf(rig, f.inputId)).toMatchObject({ status: "queued" });
        expect((await rig.storage.inner.getValue(bindTo(waitingInputs, rig.root)))?.value).toEqual([
          f.inputId,
          s.inputId,
        ]);
        expect((await rig.storage.inner.getValue(bindTo(waitingConversations, rig.root)))?.value).toEqual([rig.root]);
        // Reopen creates no work by inference.
        expect((await rig.harness.inspect(call)).start).toEqual([]);
        rig.provider.push(answerNewest());
        const before = rig.commits.length;
        const placed = await rig.harness.commitBound(call, { conversationId: rig.root }, (b) =>
          continueInbox(b, rig.root, rig.kit.options, rig.harness.now()),
        );
        expect(rig.commits.length).toBe(before + 1);
        expect(placed?.inputs).toEqual([f.inputId, s.inputId, n.inputId]);
        expect(await rig.storage.inner.getValue(bindTo(waitingInputs, rig.root))).toBeUndefined();
        expect(await rig.storage.inner.getValue(bindTo(waitingConversations, rig.root))).toBeUndefined();
        expect(await root.drive(call)).toBe("idle");
        for (const id of [f.inputId, s.inputId, n.inputId])
          expect(await resultOf(rig, id)).toMatchObject({ status: "done" });
        // Nothing queued any more: a second continue has nothing to place.
        expect(
          await rig.harness.commitBound(call, { conversationId: rig.root }, (b) =>
            continueInbox(b, rig.root, rig.kit.options, rig.harness.now()),
          ),
        ).toBeUndefined();
      }));

    it(`an idle accept after a failed group places the waiting items with it and clears the marks (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [
          fauxAssistantMessage([], { stopReason: "error", errorMessage: "400 bad request" }),
          answerNewest(),
        ]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const f = await root.queueInput({ mode: "followUp", input: "F" }, call);
        expect(await root.drive(call)).toBe("idle");
        expect((await rig.storage.inner.getValue(bindTo(waitingInputs, rig.root)))?.value).toEqual([f.inputId]);
        const b = await root.accept({ input: "B" }, call);
        expect(await rig.storage.inner.getValue(bindTo(waitingInputs, rig.root))).toBeUndefined();
        expect(await root.drive(call)).toBe("idle");
        expect(await resultOf(rig, f.inputId)).toMatchObject({ status: "done" });
        expect(await resultOf(rig, b.inputId)).toMatchObject({ status: "done" });
      }));
  });

  describe(`turn outcomes (${backend.name})`, () => {
    it(`a retryable error -> retry_wait with notBefore on the injected clock; the next attempt starts only when the clock reaches it (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock();
        const rig = await openRig(
          inner,
          [fauxAssistantMessage([], { stopReason: "error", errorMessage: "503 overloaded" }), answerNewest()],
          {
            host: { clock },
            turn: { retryBaseMs: 1000, retryJitter: 0 },
          },
        );
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        const gen = (await tasksOfKind(rig, "generation"))[0]?.id as Id;
        const start = clock.now();
        let state: { status: string; notBefore?: number; retry?: { attempt: number } } = { status: "" };
        await until(
          rig.harness,
          () =>
            rig.commits.some(
              (c) =>
                c.batch.kind === "main" &&
                c.batch.writes.some((w) => w.type === "patch" && w.id === gen && w.state.status === "retry_wait"),
            ),
          "retry_wait",
        );
        state = (await taskOf(rig, gen)).state as typeof state;
        expect(state).toMatchObject({ status: "retry_wait", notBefore: start + 1000, retry: { attempt: 1 } });
        await until(rig.harness, () => clock.pending > 0, "the sleep");
        expect(rig.provider.calls).toBe(1);
        clock.advance(999);
        await until(rig.harness, () => true);
        expect(rig.provider.calls).toBe(1);
        expect((await taskOf(rig, gen)).state.status).toBe("retry_wait");
        clock.advance(1);
        expect(await driving).toBe("idle");
        expect(rig.provider.calls).toBe(2);
        expect((await taskOf(rig, gen)).state).toMatchObject({ status: "done", attempt: 2 });
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "done" });
        const rows = await usageRows(rig);
        expect(rows.map((r) => [r.taskId, r.usage === null])).toEqual([
          [gen, false],
          [gen, false],
        ]);
      }));

    it(`overflow -> the generation settles failed(overflow), a collapse summarizes, its settlement creates the next generation, which answers (${backend.name})`, () =>
      backend.run(async (inner) => {
        const requests: Context[] = [];
        const rig = await openRig(
          inner,
          [
            answerNewest("1"),
            answerNewest("2"),
            fauxAssistantMessage([], {
              stopReason: "error",
              errorMessage: "prompt is too long: 213462 tokens > 200000 maximum",
            }),
            fauxAssistantMessage("SUMMARY OF EARLIER"),
            (context) => {
              requests.push(context);
              return fauxAssistantMessage("after the collapse");
            },
          ],
          { turn: { collapseKeepEntries: 2 } },
        );
        const root = await rig.harness.root(call);
        await root.prompt({ input: "one" }, call);
        await root.prompt({ input: "two" }, call);
        const answer = await root.prompt({ input: "three" }, call);
        expect((answer?.model?.[0] as { content: { text: string }[] }).content[0]?.text).toBe("after the collapse");
        const gens = await tasksOfKind(rig, "generation");
        expect(gens.map((g) => g.state.status)).toEqual(["done", "done", "failed", "done"]);
        const collapse = (await tasksOfKind(rig, "collapse"))[0];
        expect(gens[2]?.state).toMatchObject({ reason: "overflow", successor: collapse?.id });
        expect(collapse?.state).toMatchObject({ status: "done", reason: "overflow", successor: gens[3]?.id });
        expect(collapse?.background).toBeUndefined();
        expect(gens[3]?.after).toEqual([]);
        const first = requests[0]?.messages.find((m) => m.role !== "system");
        expect(JSON.stringify(first)).toContain("SUMMARY OF EARLIER");
        expect(await kinds(rig)).toEqual(["user", "assistant", "user", "assistant", "user", "summary", "assistant"]);
      }));

    it(`usage: one row per attempt in pi.usage with totals updated in the same commit; an unknown report counts as unknown, not zero (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream("some ", "text");
        const rig = await openRig(inner, [
          fauxAssistantMessage([], { stopReason: "error", errorMessage: "503 overloaded" }),
          answerNewest(),
          stream,
        ]);
        const root = await rig.harness.root(call);
        await root.prompt({ input: "first question" }, call);
        await root.accept({ input: "B" }, call);
        const driving = root.drive(call);
        await stream.streamed.promise;
        await root.abort(call);
        expect(await driving).toBe("idle");
        const rows = await usageRows(rig);
        expect(rows.map((r) => r.usage === null)).toEqual([false, false, true]);
        const known = rows.flatMap((r) => (r.usage === null ? [] : [r.usage]));
        const t = await totals(rig);
        expect(t).toMatchObject({ attempts: 3, unknown: 1 });
        expect(t?.input).toBe(known.reduce((n, u) => n + u.input, 0));
        expect(t?.output).toBe(known.reduce((n, u) => n + u.output, 0));
        expect(t?.totalTokens).toBeGreaterThan(0);
        // Each row was appended in the commit that updated the totals.
        for (const c of rig.commits) {
          if (c.batch.kind !== "main") continue;
          const appends = c.batch.writes.filter(
            (w) => w.type === "list.append" && w.addr.namespace === "pi.usage",
          ).length;
          const sets = c.batch.writes.filter(
            (w) => w.type === "value.set" && w.addr.namespace === "pi.usage.totals",
          ).length;
          expect(sets).toBe(appends > 0 ? 1 : 0);
        }
      }));
  });
}
