/**
 * The tool and post_tools kinds and the tool output sink (§5.5, §8.3, §9.3, §10.2) on every core
 * backend, driven without the real generation: a scripted stand-in is registered as "generation" so
 * post_tools can create its continuation. Exchanges are published exactly as a generation's settlement
 * with calls publishes them (tool-fixtures.ts). Races run in both orders with commit listeners and
 * storage barriers; crashes use GateStorage (crash + a fresh Harness over the same inner storage).
 */
import { describe, expect, it } from "vitest";
import type { AnyTool } from "../../src/kinds/services.js";
import type { ToolOutputState } from "../../src/kinds/states.js";
import { echoTool } from "../../src/tools/echo.js";
import { usageList, usageTotals } from "../../src/kinds/usage.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { GateStorage, until } from "../core/driver-fixtures.js";
import {
  answerWithCalls,
  call,
  echo,
  entry,
  gateTool,
  Gates,
  inputResult,
  isErrorResult,
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

function outputOf(state: { status: string; output?: ToolOutputState }): ToolOutputState {
  if (state.output === undefined) throw new Error(`no output in ${state.status}`);
  return state.output;
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
          const ex = await startExchange(kit, [toolCall("gate", { key: "a" }, "call-a"), toolCall("gate", { key: "b" }, "call-b")]);
          const driving = kit.h.drive(call);
          const [first, second] = order;
          const idOf = (key: string): Id => (key === "a" ? ex.tools[0] : ex.tools[1]) as Id;
          await until(kit.h, () => kit.commits.some((c) => c.batch.kind === "main" && c.batch.writes.some((w) => w.type === "patch" && w.id === idOf(second))), "both running");
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
        await until(kit.h.line.busy ? kit.h : kit.h, () => held !== undefined, "tool settled");
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
  });
}

export type { AnyTool };
export { echoTool, usageList, usageTotals, entry, isErrorResult, outputOf, selectedTools, startGeneration, answerWithCalls, toolState, transcript };
