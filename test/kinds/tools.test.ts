/**
 * The tool and post_tools kinds and the tool output sink (§5.5, §8.3, §9.3, §10.2) on every core
 * backend, driven without the real generation: a scripted stand-in is registered as "generation" so
 * post_tools can create its continuation. Exchanges are published exactly as a generation's settlement
 * with calls publishes them (tool-fixtures.ts). Races run in both orders with commit listeners and
 * storage barriers; crashes use GateStorage (crash + a fresh Harness over the same inner storage).
 */
import { describe, expect, it } from "vitest";
import type { AnyTool } from "../../src/kinds/services.js";
import type { StoredToolData, ToolResultData } from "../../src/kinds/states.js";
import { readToolData } from "../../src/kinds/stored.js";
import { echoTool } from "../../src/tools/echo.js";
import { noticeKind } from "../../src/core/entries.js";
import { readUsageRow, recordUsage, usageList, usageTotals } from "../../src/kinds/usage.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { deferred, GateStorage, settleStep, stepKind, until } from "../core/driver-fixtures.js";
import type { CommittedBatch } from "../../src/core/harness.js";
import { bindInbox, queueInput } from "../../src/core/inbox.js";
import { bind } from "../../src/core/state.js";
import { erase } from "../../src/core/task-kind.js";
import { fold, sinkCheckpoint, sinkOps, ToolSink, type OpBatch, type SinkFold } from "../../src/kinds/sink.js";
import { TaskCancelled } from "../../src/core/errors.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import type { ScratchTx } from "../../src/core/tx.js";
import type { Entry, Task } from "../../src/storage/records.js";
import {
  answerWithCalls,
  call,
  cancellable,
  echo,
  entry,
  gateTool,
  Gates,
  inputResult,
  isErrorResult,
  liveBase,
  openKit,
  resultOf,
  resultText,
  selectedTools,
  settledIn,
  startExchange,
  startGeneration,
  task,
  tasksOfKind,
  toolCall,
  toolState,
  transcript,
  type Kit,
} from "./tool-fixtures.js";

/** The successor generation post_tools created (done state), if any. */
async function successorOf(kit: Kit, postTools: Id): Promise<Id | null | undefined> {
  const state = (await task(kit, postTools)).state as { status: string; successor?: Id | null };
  return state.successor;
}

function outputOf(state: { status: string; output?: StoredToolData }): ToolResultData {
  if (state.output === undefined) throw new Error(`no output in ${state.status}`);
  return readToolData(state.output);
}

for (const backend of coreBackends) {
  describe(`tool and post_tools kinds (${backend.name})`, () => {
    for (const order of [
      ["a", "b"],
      ["b", "a"],
    ] as const) {
      it(`§10.2 Parallel tools settle in either order: ${order.join(" then ")} -> post_tools starts once (${backend.name})`, () =>
        backend.run(async (storage) => {
          const gates = new Gates();
          const kit = await openKit(storage, [gateTool(gates)]);
          const ex = await startExchange(kit, [
            toolCall("gate", { key: "a" }, "call-a"),
            toolCall("gate", { key: "b" }, "call-b"),
          ]);
          const driving = kit.h.drive(call);
          const [first, second] = order;
          const idOf = (key: string): Id => (key === "a" ? ex.tools[0] : ex.tools[1]) as Id;
          await until(
            kit.h,
            () =>
              kit.commits.some(
                (c) =>
                  c.batch.kind === "main" && c.batch.writes.some((w) => w.type === "patch" && w.id === idOf(second)),
              ),
            "both running",
          );
          gates.open(first);
          await until(kit.h, () => kit.commits.some((c) => settledIn(c, idOf(first))), "first settles");
          expect(kit.postToolsStarts).toBe(0);
          gates.open(second);
          expect(await driving).toBe("idle");
          expect(kit.postToolsStarts).toBe(1);
          const results = await Promise.all(ex.tools.map((id) => resultOf(kit, id)));
          expect(results.map(resultText)).toEqual(["start a end a", "start b end b"]);
          const successor = await successorOf(kit, ex.postTools);
          expect(typeof successor).toBe("number");
          expect((await task(kit, successor as Id)).state.status).toBe("done");
          expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "done" });
        }));
    }

    it(`§10.2 Abort vs post_tools settlement: the mark lands first -> post_tools aborts, no successor (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        const ex = await startExchange(kit, [toolCall("echo", { text: "hi" }, "c1")]);
        const conversation = await kit.h.root(call);
        let aborting: Promise<void> | undefined;
        kit.h.onCommit((c) => {
          // On the line, right after the last tool settles: the abort queues ahead of post_tools' commit.
          if (aborting === undefined && settledIn(c, ex.tools[0] as Id)) aborting = conversation.abort(call);
        });
        expect(await kit.h.drive(call)).toBe("idle");
        await aborting;
        expect((await task(kit, ex.postTools)).state.status).toBe("aborted");
        expect(await tasksOfKind(kit, "generation")).toEqual([]);
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
      }));

    it(`§10.2 Abort vs post_tools settlement: post_tools settles first -> its successor is marked and aborts (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const kit = await openKit(storage, [echo]);
        const ex = await startExchange(kit, [toolCall("echo", { text: "hi" }, "c1")]);
        const conversation = await kit.h.root(call);
        let held: Promise<void> | undefined;
        kit.h.onCommit((c) => {
          if (held === undefined && settledIn(c, ex.tools[0] as Id)) held = storage.pause(); // holds post_tools' commit
        });
        const driving = kit.h.drive(call);
        await until(kit.h, () => held !== undefined, "tool settled");
        await held;
        const aborting = conversation.abort(call); // queued behind the held post_tools commit
        storage.resume();
        await aborting;
        expect(await driving).toBe("idle");
        const post = await task(kit, ex.postTools);
        expect(post.state.status).toBe("done");
        const successor = await successorOf(kit, ex.postTools);
        expect(typeof successor).toBe("number");
        const generation = await task(kit, successor as Id);
        expect(generation.abort).toBe(true);
        expect(generation.state.status).toBe("aborted");
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
        // no unmarked live successor anywhere
        const live = await kit.h.storage.scanTasks({ live: true, limit: 100 });
        expect(live.items).toEqual([]);
      }));

    // -------------------------------------------------------------------------------------------
    // before_tool (§8.7), resolution and validation (§8.3)

    it(`before_tool block -> its own error result, the tool never runs, the group continues (${backend.name})`, () =>
      backend.run(async (storage) => {
        let ran = 0;
        const counting: AnyTool = {
          ...echo,
          async execute(_id, params, out) {
            ran += 1;
            out.write(String(params["text"]));
          },
        };
        const kit = await openKit(storage, [counting]);
        kit.hooks.on(kit.toolKind, "before_tool", () => ({ block: { reason: "denied by policy" } }));
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(ran).toBe(0);
        const result = await resultOf(kit, ex.tools[0] as Id);
        expect(isErrorResult(result)).toBe(true);
        expect(resultText(result)).toBe("Tool call blocked: denied by policy");
        expect(result.key).toBe("c1");
        expect(typeof (await successorOf(kit, ex.postTools))).toBe("number");
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "done" });
      }));

    it(`a throwing before_tool blocks the tool (failClosed, §8.7) (${backend.name})`, () =>
      backend.run(async (storage) => {
        let ran = 0;
        const counting: AnyTool = {
          ...echo,
          async execute() {
            ran += 1;
          },
        };
        const kit = await openKit(storage, [counting]);
        kit.hooks.on(kit.toolKind, "before_tool", () => {
          throw new Error("approval service down");
        });
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(ran).toBe(0);
        const result = await resultOf(kit, ex.tools[0] as Id);
        expect(isErrorResult(result)).toBe(true);
        expect(resultText(result)).toContain("approval service down");
        expect(kit.h.fault).toBeUndefined();
      }));

    it(`before_tool block with terminate stops the group: unanswered(terminated), post_tools stopped, no successor (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        kit.hooks.on(kit.toolKind, "before_tool", () => ({ block: { reason: "stop here", terminate: true } }));
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(outputOf(await toolState(kit, ex.tools[0] as Id)).terminate).toBe(true);
        expect((await task(kit, ex.postTools)).state.status).toBe("stopped");
        expect(await tasksOfKind(kit, "generation")).toEqual([]);
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "unanswered", reason: "terminated" });
      }));

    it(`before_tool may replace the arguments; the tool runs with them and they are recorded in running (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        kit.hooks.on(kit.toolKind, "before_tool", ({ args }) => ({
          args: { text: `${String(args["text"])} (edited)` },
        }));
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(resultText(await resultOf(kit, ex.tools[0] as Id))).toBe("x (edited)");
        const running = kit.commits
          .flatMap((c) => (c.batch.kind === "main" ? c.batch.writes : []))
          .find((w) => w.type === "patch" && w.id === ex.tools[0] && w.state.status === "running");
        expect(running?.type === "patch" ? running.state["args"] : undefined).toEqual({ text: "x (edited)" });
      }));

    it(`invalid arguments and an unknown tool produce their own error results without running; a valid sibling runs (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        const ex = await startExchange(kit, [
          toolCall("echo", { text: "ok" }, "good"),
          toolCall("echo", { wrong: 1 }, "invalid"),
          toolCall("nope", {}, "unknown"),
        ]);
        expect(await kit.h.drive(call)).toBe("idle");
        const results = await Promise.all(ex.tools.map((id) => resultOf(kit, id)));
        expect(results.map(resultText)[0]).toBe("ok");
        expect(results.map(isErrorResult)).toEqual([false, true, true]);
        expect(results.map(resultText)[1]).toContain("Validation failed");
        expect(results.map(resultText)[2]).toBe('Tool "nope" is not available.');
        expect(results.map((r) => r.key)).toEqual(["good", "invalid", "unknown"]);
        // none of the failed ones ever committed running (no invocation)
        const runningIds = kit.commits
          .flatMap((c) => (c.batch.kind === "main" ? c.batch.writes : []))
          .flatMap((w) => (w.type === "patch" && w.state.status === "running" ? [w.id] : []));
        expect(runningIds).toEqual([ex.tools[0]]);
        expect(typeof (await successorOf(kit, ex.postTools))).toBe("number");
      }));

    it(`an ordinary tool throw is an isError result, not a cancellation or a fault (${backend.name})`, () =>
      backend.run(async (storage) => {
        const failing: AnyTool = {
          ...echo,
          name: "fail",
          async execute(_id, _p, out) {
            out.write("partial");
            throw new Error("disk full");
          },
        };
        const kit = await openKit(storage, [failing]);
        const ex = await startExchange(kit, [toolCall("fail", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        const result = await resultOf(kit, ex.tools[0] as Id);
        expect(isErrorResult(result)).toBe(true);
        expect(resultText(result)).toBe("partial\ndisk full");
        expect((await toolState(kit, ex.tools[0] as Id)).status).toBe("done");
        expect(kit.h.fault).toBeUndefined();
        expect(typeof (await successorOf(kit, ex.postTools))).toBe("number");
      }));

    // -------------------------------------------------------------------------------------------
    // Control outcomes at post_tools (§5.5)

    it(`terminate stops the group: unanswered(terminated), safe writes placed, queued follow-ups kept, no successor (${backend.name})`, () =>
      backend.run(async (storage) => {
        const stopper: AnyTool = {
          ...echo,
          name: "stop",
          async execute(_id, _p, out) {
            out.terminate(true);
            throw new Error("giving up");
          },
        };
        const kit = await openKit(storage, [stopper, echo]);
        const ex = await startExchange(kit, [
          toolCall("stop", { text: "x" }, "c1"),
          toolCall("echo", { text: "y" }, "c2"),
        ]);
        const conversation = await kit.h.root(call);
        const followUp = await conversation.queueInput({ mode: "followUp", input: "later" }, call);
        const note = await conversation.write(
          noticeKind,
          { data: { n: 1 }, model: [{ role: "user", content: "note", timestamp: 0 }] },
          call,
        );
        expect(await kit.h.drive(call)).toBe("idle");
        const stopped = await resultOf(kit, ex.tools[0] as Id);
        expect(isErrorResult(stopped)).toBe(true);
        expect(outputOf(await toolState(kit, ex.tools[0] as Id)).terminate).toBe(true);
        expect((await task(kit, ex.postTools)).state.status).toBe("stopped");
        expect(await tasksOfKind(kit, "generation")).toEqual([]);
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "unanswered", reason: "terminated" });
        expect(await inputResult(kit, note.inputId)).toMatchObject({ status: "done" });
        expect(await inputResult(kit, followUp.inputId)).toMatchObject({ status: "queued" });
      }));

    it(`a handoff head is written after the exchange, heading itself, before placed steering (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fresh: AnyTool = {
          ...echo,
          name: "new_context",
          async execute(_id, _p, out) {
            out.write("ok");
            out.handoff("continue from the plan");
          },
        };
        const kit = await openKit(storage, [fresh, echo]);
        const ex = await startExchange(kit, [
          toolCall("new_context", { text: "x" }, "c1"),
          toolCall("echo", { text: "y" }, "c2"),
        ]);
        expect(await kit.h.drive(call)).toBe("idle");
        const entries = await transcript(kit);
        const handoff = entries.find((e) => e.kind === "handoff");
        expect(handoff).toBeDefined();
        expect(handoff?.head).toBe(handoff?.id);
        expect(handoff?.data).toEqual({ text: "continue from the plan" });
        const results = entries.filter((e) => e.kind === "tool_result");
        expect(results).toHaveLength(2);
        for (const r of results) expect(r.id).toBeLessThan(handoff?.id as Id);
        expect(typeof (await successorOf(kit, ex.postTools))).toBe("number");
      }));

    it(`conflicting handoffs in one turn reject: the group fails, no handoff head, no successor (${backend.name})`, () =>
      backend.run(async (storage) => {
        const handoffTool: AnyTool = {
          ...echo,
          name: "handoff",
          async execute(_id, p, out) {
            out.handoff(String(p["text"]));
          },
        };
        const kit = await openKit(storage, [handoffTool]);
        const ex = await startExchange(kit, [
          toolCall("handoff", { text: "plan A" }, "c1"),
          toolCall("handoff", { text: "plan B" }, "c2"),
        ]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect((await transcript(kit)).some((e) => e.kind === "handoff")).toBe(false);
        expect((await task(kit, ex.postTools)).state.status).toBe("stopped");
        expect(await tasksOfKind(kit, "generation")).toEqual([]);
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "unanswered", reason: "failed" });
      }));

    it(`addTools updates the selected tools (rewindable config, written before the entries) and the continuation's captured config (${backend.name})`, () =>
      backend.run(async (storage) => {
        const loader: AnyTool = {
          ...echo,
          name: "load",
          async execute(_id, _p, out) {
            out.addTools(["grep", "echo"]);
            out.write("loaded");
          },
        };
        const kit = await openKit(storage, [loader, echo]);
        const ex = await startExchange(kit, [toolCall("load", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(await selectedTools(kit)).toEqual(["echo", "grep"]);
        const successor = (await successorOf(kit, ex.postTools)) as Id;
        // the post_tools commit wrote the value before its entries (§3.2)
        const postCommit = kit.commits.find((c) => settledIn(c, ex.postTools));
        const writes = postCommit?.batch.writes ?? [];
        // ... and created the continuation with it captured (its settled done state keeps no config)
        const created = writes.flatMap((w) => (w.type === "task" && w.task.id === successor ? [w.task.state] : []));
        expect(created).toMatchObject([{ status: "pending", config: { tools: ["echo", "grep"] } }]);
        const valueAt = writes.findIndex((w) => w.type === "value.set" && w.addr.namespace === "pi.tools.selected");
        const firstEntry = writes.findIndex((w) => w.type === "entry");
        expect(valueAt).toBeGreaterThanOrEqual(0);
        if (firstEntry >= 0) expect(valueAt).toBeLessThan(firstEntry);
      }));

    it(`steering joins the group at post_tools; writes are placed; follow-ups wait for the final answer (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gates = new Gates();
        const kit = await openKit(storage, [gateTool(gates)]);
        const ex = await startExchange(kit, [toolCall("gate", { key: "k" }, "c1")]);
        const driving = kit.h.drive(call);
        const conversation = await kit.h.root(call);
        const steer = await conversation.queueInput({ mode: "steer", input: "also check tests" }, call);
        const followUp = await conversation.queueInput({ mode: "followUp", input: "then this" }, call);
        gates.open("k");
        expect(await driving).toBe("idle");
        const successor = (await successorOf(kit, ex.postTools)) as Id;
        expect((await task(kit, successor)).state).toMatchObject({ inputs: [ex.inputId, steer.inputId] });
        expect((await task(kit, ex.postTools)).state).toMatchObject({
          status: "done",
          inputs: [ex.inputId, steer.inputId],
        });
        const answer = (await task(kit, successor)).state as { assistant?: Id };
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "done", answer: answer.assistant });
        expect(await inputResult(kit, steer.inputId)).toMatchObject({ status: "done", answer: answer.assistant });
        // the follow-up started the next group after the final answer
        expect(await inputResult(kit, followUp.inputId)).toMatchObject({ status: "done" });
        const steerEntry = (await inputResult(kit, steer.inputId)) as { entry: Id };
        const result = await resultOf(kit, ex.tools[0] as Id);
        expect(steerEntry.entry).toBeGreaterThan(result.id);
      }));

    // -------------------------------------------------------------------------------------------
    // Output: diagnostics, bounds, usage (§9.3, §8.2)

    it(`diagnostics are rendered after the data in a delimited <harness> block; isError is unaffected (${backend.name})`, () =>
      backend.run(async (storage) => {
        const noisy: AnyTool = {
          ...echo,
          name: "read",
          async execute(_id, _p, out) {
            out.write("line 1\nlast line of the file");
            out.diag("warn", "the file changed on disk since it was read", "stale");
            out.diag("info", "path resolved to /repo/a.ts");
          },
        };
        const kit = await openKit(storage, [noisy]);
        const ex = await startExchange(kit, [toolCall("read", { text: "a.ts" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        const result = await resultOf(kit, ex.tools[0] as Id);
        expect(resultText(result)).toBe(
          "line 1\nlast line of the file\n<harness>\n[warn] the file changed on disk since it was read\n[info] path resolved to /repo/a.ts\n</harness>",
        );
        expect(isErrorResult(result)).toBe(false);
        const data = result.data as { diags: unknown[]; content?: unknown };
        expect(data.content).toBeUndefined();
        expect(data.diags).toEqual([
          { severity: "warn", message: "the file changed on disk since it was read", code: "stale" },
          { severity: "info", message: "path resolved to /repo/a.ts", code: null },
        ]);
      }));

    it(`bounded output: the sink keeps the tail window, records truncation totals and warns; the settled state keeps the output without its content, which the result entry holds (issue 15) (${backend.name})`, () =>
      backend.run(async (storage) => {
        const chatty: AnyTool = {
          ...echo,
          name: "chatty",
          maxOutputChars: 10,
          async execute(_id, _p, out) {
            for (let i = 0; i < 5; i++) out.write(`chunk${i}-`);
          },
        };
        const kit = await openKit(storage, [chatty]);
        const ex = await startExchange(kit, [toolCall("chatty", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        const output = outputOf(await toolState(kit, ex.tools[0] as Id));
        // The content lives in the result entry only (the terminal state does not repeat it);
        // the entry's text below is the kept tail window.
        expect(output).not.toHaveProperty("content");
        expect(output.truncation).toEqual({ totalChars: 35, retainedChars: 10, truncated: true });
        expect(output.diags).toEqual([
          { severity: "warn", message: "output truncated: showing the last 10 of 35 characters", code: "truncated" },
        ]);
        expect(resultText(await resultOf(kit, ex.tools[0] as Id))).toBe(
          "k3-chunk4-\n<harness>\n[warn] output truncated: showing the last 10 of 35 characters\n</harness>",
        );
      }));

    it(`sink usage becomes one usage row and updates pi.usage.totals in the settlement commit (${backend.name})`, () =>
      backend.run(async (storage) => {
        const usage = (n: number) => ({
          input: n,
          output: n,
          cacheRead: 0,
          cacheWrite: 0,
          totalTokens: 2 * n,
          cost: { input: 0.001 * n, output: 0.001 * n, cacheRead: 0, cacheWrite: 0, total: 0.002 * n },
        });
        const paid: AnyTool = {
          ...echo,
          name: "paid",
          async execute(_id, _p, out) {
            out.usage(usage(10));
            out.usage(usage(5));
            out.write("ok");
          },
        };
        const kit = await openKit(storage, [paid, echo]);
        const ex = await startExchange(kit, [
          toolCall("paid", { text: "x" }, "c1"),
          toolCall("echo", { text: "y" }, "c2"),
        ]);
        expect(await kit.h.drive(call)).toBe("idle");
        const rows = await kit.h.list(usageList).read(undefined, call);
        expect(rows.items.map((e) => readUsageRow(e.value))).toEqual([
          {
            conversationId: kit.root,
            taskId: ex.tools[0],
            kind: "tool",
            model: "paid",
            usage: { ...usage(15), cost: { ...usage(15).cost, total: expect.closeTo(0.03, 10) as unknown as number } },
          },
        ]);
        const totals = await kit.h.value(usageTotals).get(call);
        expect(totals).toMatchObject({ attempts: 1, unknown: 0, input: 15, output: 15, totalTokens: 30 });
        const settle = kit.commits.find((c) => settledIn(c, ex.tools[0] as Id));
        expect(settle?.batch.writes.some((w) => w.type === "list.append" && w.addr.namespace === "pi.usage")).toBe(
          true,
        );
      }));

    it(`the echo tool returns its arguments as JSON text (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echoTool]);
        const ex = await startExchange(kit, [toolCall("echo", { text: "hi", n: 2 }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(JSON.parse(resultText(await resultOf(kit, ex.tools[0] as Id)))).toEqual({ text: "hi", n: 2 });
      }));

    it(`sequential tools (B after A) run one after the other and post_tools still starts once (${backend.name})`, () =>
      backend.run(async (storage) => {
        const order: string[] = [];
        const logged: AnyTool = {
          ...echo,
          async execute(_id, p, out) {
            order.push(`start ${String(p["text"])}`);
            await Promise.resolve();
            order.push(`end ${String(p["text"])}`);
            out.write("ok");
          },
        };
        const kit = await openKit(storage, [logged]);
        await startExchange(kit, [toolCall("echo", { text: "A" }, "c1"), toolCall("echo", { text: "B" }, "c2")], {
          sequential: true,
        });
        expect(await kit.h.drive(call)).toBe("idle");
        expect(order).toEqual(["start A", "end A", "start B", "end B"]);
        expect(kit.postToolsStarts).toBe(1);
      }));
  });
}

/** A scratch commit of this task that carries a sink op batch. */
function scratchOf(c: CommittedBatch, taskId: Id): boolean {
  return c.batch.kind === "scratch" && c.batch.task === taskId;
}

/** The durable sink state of a task, read straight from storage (what recover/abort fold). */
async function durableSink(kit: Kit, taskId: Id, maxChars = 50_000): Promise<SinkFold> {
  const checkpoint = (await kit.h.storage.getValue(bind(sinkCheckpoint, { taskId })))?.value;
  const page = await kit.h.storage.readList(bind(sinkOps, { taskId }), { limit: 1000 });
  return fold(
    page.items.map((e) => e.value),
    maxChars,
    checkpoint,
  );
}

/** A crash: the old harness's storage refuses everything; nothing it does later can land. */
function crash(storage: GateStorage, gates?: Gates, keys: readonly string[] = []): void {
  storage.crash();
  for (const key of keys) gates?.open(key); // let the dead process's blocked tools unwind
}

for (const backend of coreBackends) {
  describe(`tool recovery, abort and the sink on durable state (${backend.name})`, () => {
    it(`recover with replay "never" -> an interrupted error result built from the durable scratch, not re-run (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const gates = new Gates();
        const kit = await openKit(storage, [gateTool(gates, { replay: "never" })]);
        const ex = await startExchange(kit, [toolCall("gate", { key: "k" }, "c1")]);
        const toolId = ex.tools[0] as Id;
        void kit.h.drive(call).catch(() => undefined);
        await until(kit.h, () => kit.commits.some((c) => scratchOf(c, toolId)), "output reached scratch");
        crash(storage, gates, ["k"]);

        let started = 0;
        const kit2 = await openKit(storage.reopen(), [
          gateTool(new Gates(), { replay: "never", started: () => (started += 1) }),
        ]);
        expect((await toolState(kit2, toolId)).status).toBe("running");
        expect(await kit2.h.drive(call)).toBe("idle");
        expect(started).toBe(0);
        const result = await resultOf(kit2, toolId);
        expect(isErrorResult(result)).toBe(true);
        expect(resultText(result)).toMatch(/^start k\n<harness>\n\[error\] the call was interrupted by a restart/);
        expect(outputOf(await toolState(kit2, toolId)).diags.map((d) => d.code)).toEqual(["interrupted"]);
        expect(kit2.postToolsStarts).toBe(1);
        expect(await inputResult(kit2, ex.inputId)).toMatchObject({ status: "done" });
      }));

    it(`recover with replay "safe" -> runs the tool again from clean scratch (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const gates = new Gates();
        const kit = await openKit(storage, [gateTool(gates, { replay: "safe" })]);
        const ex = await startExchange(kit, [toolCall("gate", { key: "k" }, "c1")]);
        const toolId = ex.tools[0] as Id;
        void kit.h.drive(call).catch(() => undefined);
        await until(kit.h, () => kit.commits.some((c) => scratchOf(c, toolId)), "output reached scratch");
        crash(storage, gates, ["k"]);

        const gates2 = new Gates();
        let started = 0;
        const kit2 = await openKit(storage.reopen(), [
          gateTool(gates2, { replay: "safe", started: () => (started += 1) }),
        ]);
        const driving = kit2.h.drive(call);
        await until(
          kit2.h,
          () => kit2.commits.some((c) => scratchOf(c, toolId) && c.batch.writes.some((w) => w.type === "list.append")),
          "re-run output reached scratch",
        );
        // the attempt cleared the previous attempt's scratch: only the re-run's output is on disk
        expect((await durableSink(kit2, toolId)).text).toBe("start k");
        gates2.open("k");
        expect(await driving).toBe("idle");
        expect(started).toBe(1);
        const result = await resultOf(kit2, toolId);
        expect(isErrorResult(result)).toBe(false);
        expect(resultText(result)).toBe("start k end k");
      }));

    it(`abort writes an aborted error result from durable scratch and marks owned child foreground tasks, leaving child queues (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gates = new Gates();
        let kitRef: Kit | undefined;
        const child = stepKind("child", {
          execute: async (t, runtime, c) => {
            await cancellable(gates.get("child").promise, c);
            await settleStep(runtime, t, "done", c);
          },
        });
        const spawner: AnyTool = {
          ...echo,
          name: "spawn",
          async execute(_id, _p, out, rt, c) {
            const h = (kitRef as Kit).h;
            await h.commitBound(c, { conversationId: rt.conversationId }, async (b) => {
              const conversation = b.createConversation({ owner: rt.taskId });
              b.task(child, conversation, { state: { status: "pending", tag: "child", refs: [] } });
              queueInput(b, conversation, { mode: "steer", input: "queued in the child" });
              const self = await b.getTask(rt.taskId);
              if (self === undefined) throw new Error("tool task missing");
              // owns is recorded on the creating task in the creation commit (§5.7)
              b.push({ type: "patch", id: rt.taskId, role: "inflight", state: self.state, owns: [conversation] });
            });
            out.write("spawned; waiting");
            await cancellable(gates.get("tool").promise, c);
          },
        };
        const kit = await openKit(storage, [spawner], { extraKinds: [erase(child)] });
        kitRef = kit;
        const ex = await startExchange(kit, [toolCall("spawn", { text: "x" }, "c1")]);
        const toolId = ex.tools[0] as Id;
        const driving = kit.h.drive(call);
        await until(kit.h, () => kit.commits.some((c) => scratchOf(c, toolId)), "tool output durable");
        const owned = (await task(kit, toolId)).owns ?? [];
        expect(owned).toHaveLength(1);
        const childConversation = owned[0] as Id;
        const [childTask] = await tasksOfKind(kit, "child", childConversation);
        await kit.h.abortTask(toolId, call);
        expect(await driving).toBe("idle");

        const toolTask = await task(kit, toolId);
        expect(toolTask.state.status).toBe("aborted");
        const result = await resultOf(kit, toolId);
        expect(isErrorResult(result)).toBe(true);
        expect(resultText(result)).toBe("spawned; waiting\n<harness>\n[error] the call was aborted\n</harness>");
        const childAfter = await task(kit, (childTask as Task).id);
        expect(childAfter.abort).toBe(true);
        expect(childAfter.state.status).toBe("aborted");
        const queued = await kit.h.storage.readList(bindInbox(childConversation), { limit: 10 });
        expect(queued.items.map((e) => e.value)).toEqual([{ mode: "steer", input: "queued in the child" }]);
        // the aborted tool is an outcome; post_tools continues the group
        expect(kit.postToolsStarts).toBe(1);
        expect(await inputResult(kit, ex.inputId)).toMatchObject({ status: "done" });
      }));

    it(`the sink drops late output after a mark; the fresh abort builds the result from what was durable before it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gate = deferred();
        const stubborn: AnyTool = {
          ...echo,
          name: "stubborn",
          async execute(_id, _p, out) {
            out.write("early");
            await gate.promise; // ignores the signal
            out.write(" late");
            out.diag("info", "late diag");
          },
        };
        const kit = await openKit(storage, [stubborn]);
        const ex = await startExchange(kit, [toolCall("stubborn", { text: "x" }, "c1")]);
        const toolId = ex.tools[0] as Id;
        const driving = kit.h.drive(call);
        await until(kit.h, () => kit.commits.some((c) => scratchOf(c, toolId)), "early output durable");
        await kit.h.abortTask(toolId, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(kit.h.fault).toBeUndefined();
        expect((await task(kit, toolId)).state.status).toBe("aborted");
        const text = resultText(await resultOf(kit, toolId));
        expect(text).toBe("early\n<harness>\n[error] the call was aborted\n</harness>");
        const scratchAfterMark = kit.commits.filter((c) => scratchOf(c, toolId));
        expect(scratchAfterMark).toHaveLength(1);
      }));

    it(`recordUsage: rows and totals in one commit; unknown usage counts as unknown, not zero; two rows in one commit add up (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        const usage = {
          input: 3,
          output: 4,
          cacheRead: 1,
          cacheWrite: 0,
          totalTokens: 8,
          cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0.25 },
        };
        await kit.h.commitBound(call, {}, async (b) => {
          await recordUsage(b, { conversationId: kit.root, taskId: 1, kind: "generation", model: "m", usage });
          await recordUsage(b, { conversationId: kit.root, taskId: 1, kind: "generation", model: "m", usage: null });
        });
        await kit.h.commitBound(call, {}, (b) =>
          recordUsage(b, { conversationId: kit.root, taskId: 2, kind: "tool", model: "echo", usage }),
        );
        expect(await kit.h.value(usageTotals).get(call)).toEqual({
          attempts: 3,
          unknown: 1,
          input: 6,
          output: 8,
          cacheRead: 2,
          cacheWrite: 0,
          totalTokens: 16,
          cost: 0.5,
        });
        expect((await kit.h.list(usageList).read(undefined, call)).items).toHaveLength(3);
      }));

    it(`post_tools writes an unavailable-tool result for a tool task orphaned at open (§5.1, §6.4) and continues the group (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const kit = await openKit(storage, [echo]);
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        crash(storage);
        // A process whose registry lacks the tool kind: open orphans the live foreground tool task.
        const without = await openKit(storage.reopen(), [echo], { withoutToolKind: true });
        expect((await task(without, ex.tools[0] as Id)).state.status).toBe("orphaned");
        await without.h.close(call);
        const kit2 = await openKit(storage.reopen(), [echo]);
        expect(await kit2.h.drive(call)).toBe("idle");
        const results = (await transcript(kit2)).filter((e) => e.kind === "tool_result");
        expect(results).toHaveLength(1);
        expect(results[0]?.key).toBe("c1");
        expect(isErrorResult(results[0] as Entry)).toBe(true);
        expect(resultText(results[0] as Entry)).toContain("unavailable");
        expect(await inputResult(kit2, ex.inputId)).toMatchObject({ status: "done" });
      }));

    it(`a throwing after_tool is reported and skipped; the result stands (${backend.name})`, () =>
      backend.run(async (storage) => {
        const kit = await openKit(storage, [echo]);
        const seen: string[] = [];
        kit.hooks.on(kit.toolKind, "after_tool", ({ output }) => {
          seen.push(JSON.stringify(output.content));
          throw new Error("observer broke");
        });
        const ex = await startExchange(kit, [toolCall("echo", { text: "x" }, "c1")]);
        expect(await kit.h.drive(call)).toBe("idle");
        expect(seen).toEqual([JSON.stringify([{ type: "text", text: "x" }])]);
        expect(kit.hookFailures.map((f) => f.point)).toEqual(["after_tool"]);
        expect(resultText(await resultOf(kit, ex.tools[0] as Id))).toBe("x");
      }));

    it(`§5.5 crash before the generation settles -> the generation is live and recovers; the exchange then runs once (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const hang = deferred();
        const kit = await openKit(storage, [echo], {
          script: {
            execute: async (t, runtime, c) => {
              const { inputs, config, retry } = liveBase(t.state);
              await runtime.commit(
                (tx) => tx.patch(t, "streaming", { inputs, config, retry, requestThrough: t.id }),
                c,
              );
              await cancellable(hang.promise, c);
            },
          },
        });
        const { inputId, generation } = await startGeneration(kit);
        void kit.h.drive(call).catch(() => undefined);
        await until(
          kit.h,
          () =>
            kit.commits.some(
              (c) =>
                c.batch.kind === "main" &&
                c.batch.writes.some((w) => w.type === "patch" && w.id === generation && w.state.status === "streaming"),
            ),
          "streaming",
        );
        crash(storage);
        hang.resolve();

        const kit2 = await openKit(storage.reopen(), [echo], {
          script: { recover: answerWithCalls([toolCall("echo", { text: "after restart" }, "c1")]) },
        });
        expect((await task(kit2, generation)).role).toBe("inflight");
        expect(await kit2.h.drive(call)).toBe("idle");
        expect((await task(kit2, generation)).state.status).toBe("done");
        const results = (await transcript(kit2)).filter((e) => e.kind === "tool_result");
        expect(results.map(resultText)).toEqual(["after restart"]);
        expect(kit2.postToolsStarts).toBe(1);
        expect(await inputResult(kit2, inputId)).toMatchObject({ status: "done" });
      }));

    it(`§5.5 crash after the generation settles -> assistant, tools and post_tools exist; nothing to repair (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const kit = await openKit(storage, [echo], {
          script: {
            execute: answerWithCalls([
              toolCall("echo", { text: "one" }, "c1"),
              toolCall("echo", { text: "two" }, "c2"),
            ]),
          },
        });
        const { inputId, generation } = await startGeneration(kit);
        kit.h.onCommit((c) => {
          if (settledIn(c, generation)) crash(storage);
        });
        void kit.h.drive(call).catch(() => undefined);
        await until(kit.h, () => storage.closed, "generation settled");

        const kit2 = await openKit(storage.reopen(), [echo]);
        const live = await kit2.h.inspect(call);
        expect(live.start.map((t) => t.kind).sort()).toEqual(["post_tools", "tool", "tool"]);
        expect(live.inflight).toEqual([]);
        expect(await kit2.h.drive(call)).toBe("idle");
        expect((await transcript(kit2)).filter((e) => e.kind === "tool_result").map(resultText)).toEqual([
          "one",
          "two",
        ]);
        expect(kit2.postToolsStarts).toBe(1);
        expect(await inputResult(kit2, inputId)).toMatchObject({ status: "done" });
      }));

    it(`§5.5 crash after the last tool -> post_tools exists and is startable; it runs once (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const kit = await openKit(storage, [echo]);
        const ex = await startExchange(kit, [
          toolCall("echo", { text: "one" }, "c1"),
          toolCall("echo", { text: "two" }, "c2"),
        ]);
        let settled = 0;
        kit.h.onCommit((c) => {
          if (ex.tools.some((id) => settledIn(c, id)) && ++settled === ex.tools.length) crash(storage);
        });
        void kit.h.drive(call).catch(() => undefined);
        await until(kit.h, () => storage.closed, "last tool settled");
        expect(kit.postToolsStarts).toBeLessThanOrEqual(1); // it may have started and failed on the dead storage

        const kit2 = await openKit(storage.reopen(), [echo]);
        const live = await kit2.h.inspect(call);
        expect(live.start.map((t) => t.id)).toEqual([ex.postTools]);
        expect(await kit2.h.drive(call)).toBe("idle");
        expect(kit2.postToolsStarts).toBe(1);
        expect((await transcript(kit2)).filter((e) => e.kind === "tool_result")).toHaveLength(2);
        expect(await inputResult(kit2, ex.inputId)).toMatchObject({ status: "done" });
      }));
  });
}

// ---------------------------------------------------------------------------------------------
// The sink on its own: a fake runtime whose scratch is an in-memory list/checkpoint.

class FakeScratch {
  batches: OpBatch[] = [];
  checkpoint: SinkFold | undefined;
  commits = 0;
  reject: unknown;
  readonly runtime: Pick<TaskRuntime, "scratch" | "now"> = {
    now: () => 0,
    scratch: async <T>(plan: (sc: ScratchTx) => T | Promise<T>): Promise<T> => {
      if (this.reject !== undefined) throw this.reject;
      const self = this;
      const sc = {
        taskId: 1,
        list: () => ({
          append(v: OpBatch) {
            self.batches.push(v);
            return 0;
          },
          clear() {
            self.batches = [];
          },
        }),
        value: () => ({
          set(v: SinkFold) {
            self.checkpoint = v;
          },
          delete() {
            self.checkpoint = undefined;
          },
        }),
      } as unknown as ScratchTx;
      const result = await plan(sc);
      this.commits += 1;
      return result;
    },
  };
  durable(maxChars: number): SinkFold {
    return fold(this.batches, maxChars, this.checkpoint);
  }
}

const macrotask = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

describe("tool output sink", () => {
  it("coalesces a burst into one scratch commit of compact ops that folds to the live state", async () => {
    const fake = new FakeScratch();
    const sink = new ToolSink({ runtime: fake.runtime, call, flushMs: 50, maxChars: 100 });
    sink.write("a");
    sink.write("b");
    sink.write("c");
    sink.diag("info", "note");
    sink.addTools(["grep"]);
    await sink.drain();
    expect(fake.commits).toBe(1);
    expect(fake.batches).toEqual([
      {
        o: [
          { t: "w", s: "abc", n: 3 },
          { t: "g", v: { severity: "info", message: "note", code: null } },
          { t: "a", v: ["grep"] },
        ],
      },
    ]);
    expect(fake.durable(100)).toEqual(sink.state());
  });

  it("a replace drops earlier pending text and restarts the totals; details mutations persist on flush", async () => {
    const fake = new FakeScratch();
    const sink = new ToolSink({ runtime: fake.runtime, call, flushMs: 0, maxChars: 100 });
    sink.write("draft");
    sink.replace("final");
    (sink.details as { n?: number }).n = 1;
    await sink.drain();
    expect(fake.batches).toEqual([
      {
        o: [
          { t: "r", s: "final" },
          { t: "d", v: { n: 1 } },
        ],
      },
    ]);
    expect(sink.output(false)).toMatchObject({
      content: [{ type: "text", text: "final" }],
      details: { n: 1 },
      truncation: { totalChars: 5, retainedChars: 5, truncated: false },
    });
  });

  it("compacts into a checkpoint when ops pass the byte bound, so scratch stays bounded and still folds to the live state", async () => {
    const fake = new FakeScratch();
    const sink = new ToolSink({ runtime: fake.runtime, call, flushMs: 0, maxChars: 20, compactBytes: 200 });
    for (let i = 0; i < 40; i++) {
      sink.write(`line ${i}\n`);
      await macrotask();
    }
    await sink.drain();
    expect(fake.checkpoint).toBeDefined();
    expect(JSON.stringify(fake.batches).length).toBeLessThanOrEqual(200);
    expect(fake.durable(20)).toEqual(sink.state());
    expect(sink.output(false).truncation).toMatchObject({ retainedChars: 20, truncated: true });
  });

  it("an expected cancellation rejection stops persistence silently; drain resolves; output after drain is dropped", async () => {
    const fake = new FakeScratch();
    const sink = new ToolSink({ runtime: fake.runtime, call, flushMs: 0, maxChars: 100 });
    sink.write("early");
    await macrotask();
    expect(fake.commits).toBe(1);
    fake.reject = new TaskCancelled(7);
    sink.write(" late");
    await macrotask();
    fake.reject = undefined;
    sink.write(" later");
    await sink.drain();
    expect(sink.cancelled).toBe(true);
    expect(fake.commits).toBe(1);
    expect(fake.durable(100).text).toBe("early");
    sink.write(" leaked");
    expect(sink.dropped).toBe(1);
    expect(sink.state().text).toBe("early late later");
  });

  it("a real persistence error is reported and rethrown by drain (it faults the invocation)", async () => {
    const fake = new FakeScratch();
    const reported: unknown[] = [];
    const sink = new ToolSink({
      runtime: fake.runtime,
      call,
      flushMs: 0,
      maxChars: 100,
      report: (e) => reported.push(e),
    });
    const failure = new Error("disk on fire");
    fake.reject = failure;
    sink.write("x");
    await expect(sink.drain()).rejects.toBe(failure);
    expect(reported).toEqual([failure]);
    expect(sink.cancelled).toBe(false);
  });

  it("images are never windowed; usage accumulates", async () => {
    const fake = new FakeScratch();
    const sink = new ToolSink({ runtime: fake.runtime, call, flushMs: 0, maxChars: 3 });
    sink.write("abcdef");
    sink.image({ type: "image", data: "AAAA", mimeType: "image/png" });
    const u = {
      input: 1,
      output: 2,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 3,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0.5 },
    };
    sink.usage(u);
    sink.usage(u);
    await sink.drain();
    const out = sink.output(false);
    expect(out.content).toEqual([
      { type: "text", text: "def" },
      { type: "image", data: "AAAA", mimeType: "image/png" },
    ]);
    expect(out.usage).toMatchObject({ input: 2, output: 4, totalTokens: 6, cost: { total: 1 } });
    expect(fake.durable(3)).toEqual(sink.state());
  });
});
