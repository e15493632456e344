/**
 * The `subagent` tool over real turns (§8.5): a model calls it with each SubagentCommand (run, spawn,
 * send, status, wait, stop), in memory and in SQLite inside a Durable Object. Also the values a child
 * starts with (model, thinking, tools narrowed never widened), inherited context (§8.5: the parent's
 * context at the last complete exchange before the launching one), ids the parent does not own, and
 * aborts: of the call during `run` (the tool's own cleanup: child's foreground marked, its queue kept, an
 * error result), of the parent conversation during `run` (§6.3: the child's queued steer/followUp are
 * withdrawn in the same commit) and of the parent while a spawned child lives (child unaffected). The
 * blocking budget (§8.3) of `run` and `wait`, on a fake clock: past it the call settles with the child's
 * id, the child runs on, and its answer reaches the parent once as a notice. Deleting a conversation
 * deletes its ownership subtree (§6.4).
 */
import { describe, expect, it } from "vitest";
import { userKind } from "../../src/core/entries.js";
import { INPUT_RESULT_NAMESPACE, requestKey } from "../../src/core/inbox.js";
import { CountingStorage } from "../core/counting-storage.js";
import { childrenList } from "../../src/core/spawn.js";
import { bind, bindTo } from "../../src/core/state.js";
import { generationConfig } from "../../src/kinds/config.js";
import { readUsageRow, usageList } from "../../src/kinds/usage.js";
import { parseSubagentCommand, subagentRequestKey } from "../../src/tools/subagent.js";
import type { Id, JsonValue, Page, ValueQuery, Version } from "../../src/storage/records.js";
import type { StoredToolData, ToolResultData } from "../../src/kinds/states.js";
import { readToolData } from "../../src/kinds/stored.js";
import type { Entry } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { FakeClock, flush } from "../core/driver-fixtures.js";
import {
  call,
  detailsOf,
  eventually,
  HOLD,
  openSubagents,
  ownedBy,
  resultOf,
  selectedOf,
  subagentCall,
  tasksOf,
  textOf,
  toolResults,
} from "./subagent-fixtures.js";

/** The result data of a tool result entry (delegated id, diagnostics), defaults filled (stored compact). */
function dataOf(entry: Entry | undefined): ToolResultData {
  return readToolData((entry?.data ?? {}) as StoredToolData);
}

describe("SubagentCommand input", () => {
  it("parses each command with exactly its fields and refuses the rest with the field named", () => {
    expect(parseSubagentCommand({ command: "run", prompt: "p", context: "inherit", tools: ["a", "a"] })).toEqual({
      command: "run",
      prompt: "p",
      context: "inherit",
      tools: ["a"],
    });
    expect(parseSubagentCommand({ command: "spawn", prompt: "p" })).toEqual({ command: "spawn", prompt: "p" });
    expect(parseSubagentCommand({ command: "send", id: 3, text: "t" })).toEqual({ command: "send", id: 3, text: "t" });
    for (const command of ["status", "wait", "stop"] as const)
      expect(parseSubagentCommand({ command, id: 7 })).toEqual({ command, id: 7 });
    expect(() => parseSubagentCommand({ command: "fly" })).toThrow(/command must be one of/);
    expect(() => parseSubagentCommand({ command: "run" })).toThrow(/run needs prompt/);
    expect(() => parseSubagentCommand({ command: "run", prompt: " " })).toThrow(/prompt must be a non-empty string/);
    expect(() => parseSubagentCommand({ command: "run", prompt: "p", id: 3 })).toThrow(/run takes no id/);
    expect(() => parseSubagentCommand({ command: "spawn", prompt: "p", context: "all" })).toThrow(/context must be/);
    expect(() => parseSubagentCommand({ command: "spawn", prompt: "p", tools: [1] })).toThrow(/tools must be a list/);
    expect(() => parseSubagentCommand({ command: "send", id: 3 })).toThrow(/send needs text/);
    expect(() => parseSubagentCommand({ command: "wait", id: -1 })).toThrow(/id must be a subagent id/);
    expect(() => parseSubagentCommand({ command: "stop", id: 1.5 })).toThrow(/id must be a subagent id/);
  });
});

for (const backend of coreBackends) {
  describe(`subagent tool (${backend.name})`, () => {
    it(`§8.5 run: one creation commit, the child answers, one result entry (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness } = await openSubagents(storage);
        const creations: number[] = [];
        harness.onCommit((commit) => {
          if (commit.batch.kind === "main" && commit.batch.writes.some((w) => w.type === "createConversation"))
            creations.push(commit.batch.writes.length);
        });
        const root = await harness.root(call);
        await root.value(generationConfig.thinking).set("low", call);
        const answer = await root.prompt({ input: subagentCall({ command: "run", prompt: "count to two" }) }, call);
        expect(textOf(answer)).toBe("count to two");
        const [tool] = await tasksOf(harness, root.id, "tool");
        expect(tool?.state).toMatchObject({ status: "done" });
        const children = await ownedBy(harness, tool!.id);
        expect(children).toHaveLength(1);
        expect(creations).toHaveLength(1);
        const child = children[0] as Id;
        const results = await toolResults(harness, root.id);
        expect(results.map(textOf)).toEqual(["count to two"]);
        expect(detailsOf(results[0])).toMatchObject({ id: child, command: "run", status: "done" });
        // The child: owned by the call, the parent's model and thinking, the parent's tools, its answer.
        const handle = (await harness.conversation(child, call))!;
        expect(handle.record).toEqual({ id: child, owner: tool!.id });
        expect(await handle.settings.get(call)).toMatchObject({
          model: await root.value(generationConfig.model).get(call),
          thinking: "low",
          selectedTools: ["subagent", "echo"],
        });
        const entries = (await harness.entries(child, { limit: 50 }, call)).items.filter((e) => e.kind !== "system");
        expect(entries.map((e) => [e.kind, textOf(e)])).toEqual([
          ["user", "count to two"],
          ["assistant", "count to two"],
        ]);
        // The acceptance is named by the call's request key (§3.4), and the parent lists its child.
        expect(
          (await harness.storage.getValue(bind(requestKey(subagentRequestKey(tool!.id)), {})))?.value,
        ).toMatchObject({ conversationId: child });
        expect(
          (await harness.storage.readList(bindTo(childrenList, root.id), { limit: 10 })).items.map((e) => e.value),
        ).toEqual([child]);
        // Usage is attributed to the child and rolls up into the session totals.
        const rows = (await harness.storage.readList(bindTo(usageList, root.id), { limit: 100 })).items.map((e) =>
          readUsageRow(e.value),
        );
        expect(
          rows
            .filter((r) => r.kind === "generation")
            .map((r) => r.conversationId)
            .sort(),
        ).toEqual([root.id, root.id, child].sort());
      }));

    it(`§8.5 spawn settles at once with the child's id; wait returns its answer; status shows it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        const spawned = await root.prompt(
          { input: subagentCall({ command: "spawn", prompt: `${HOLD} list the files` }) },
          call,
        );
        expect(textOf(spawned)).toMatch(/^spawned subagent \d+/);
        const [tool] = await tasksOf(harness, root.id, "tool");
        const child = (await ownedBy(harness, tool!.id))[0] as Id;
        expect(tool?.role).toBe("terminal");
        await fx.holding();
        // The child runs on its own while the parent is idle: status names its live generation.
        const status = await root.prompt({ input: subagentCall({ command: "status", id: child }) }, call);
        expect(textOf(status)).toContain(`subagent ${child}: busy`);
        expect(textOf(status)).toMatch(/live tasks: generation \d+ \(streaming\)/);
        fx.release();
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toBe(`${HOLD} list the files`);
        const idle = await root.prompt({ input: subagentCall({ command: "status", id: child }) }, call);
        expect(textOf(idle)).toContain(`subagent ${child}: idle`);
        expect(textOf(idle)).toContain("live tasks: none");
        expect(textOf(idle)).toContain(`assistant: ${HOLD} list the files`);
        expect(await ownedBy(harness, tool!.id)).toEqual([child]);
      }));

    it(`§8.5 send accepts into the child (queued while it is busy) and wait answers the last input (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} first` }) }, call);
        const child = (await ownedBy(harness, (await tasksOf(harness, root.id, "tool"))[0]!.id))[0] as Id;
        await fx.holding();
        const sent = await root.prompt({ input: subagentCall({ command: "send", id: child, text: "second" }) }, call);
        expect(textOf(sent)).toMatch(new RegExp(`^sent to subagent ${child} \\(input \\d+, queued`));
        const inputId = detailsOf((await toolResults(harness, root.id))[1]).inputId as Id;
        expect(await resultOf(harness, child, inputId)).toMatchObject({ status: "queued" });
        fx.release();
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toBe("second");
        expect(await resultOf(harness, child, inputId)).toMatchObject({ status: "done" });
        // Idle child: send places at once and starts a turn.
        const again = await root.prompt({ input: subagentCall({ command: "send", id: child, text: "third" }) }, call);
        expect(textOf(again)).toMatch(/placed\)$/);
        expect(textOf(await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call))).toBe("third");
      }));

    it(`status and wait find the child's last input with a bounded read, however many inputs it has (§6.2) (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new InputResultReads(inner);
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} first` }) }, call);
        const child = (await harness.conversation(
          (await ownedBy(harness, (await tasksOf(harness, root.id, "tool"))[0]!.id))[0] as Id,
          call,
        ))!;
        await fx.holding();
        let last: Id = 0;
        for (let i = 0; i < 40; i++) last = (await child.accept({ input: `follow-up ${i}` }, call)).inputId;
        storage.scanned = 0;
        const status = await root.prompt({ input: subagentCall({ command: "status", id: child.id }) }, call);
        expect(textOf(status)).toContain(`last input ${last}: queued`);
        // No scan of the child's input results: its newest input is found by bounded reads.
        expect(storage.scanned).toBe(0);
        fx.release();
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child.id }) }, call);
        expect(textOf(waited)).toBe("follow-up 39");
        expect(storage.scanned).toBe(0);
        expect(detailsOf((await toolResults(harness, root.id)).at(-1))).toMatchObject({
          inputId: last,
          status: "done",
        });
      }));

    it(`§8.5 stop aborts the child's running work (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} forever` }) }, call);
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        await fx.holding();
        const stopped = await root.prompt({ input: subagentCall({ command: "stop", id: child }) }, call);
        expect(textOf(stopped)).toContain(`subagent ${child}: stop requested`);
        await (await harness.conversation(child, call))!.drive(call);
        const gens = await tasksOf(harness, child, "generation");
        expect(gens.map((t) => t.state.status)).toEqual(["aborted"]);
        const inputId = detailsOf((await toolResults(harness, root.id))[0]).inputId as Id;
        expect(await resultOf(harness, child, inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toContain(`did not answer input ${inputId}: aborted`);
      }));

    it(`§8.5 tools narrow the parent's selection; a tool the parent has not selected is refused and nothing is created (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness } = await openSubagents(storage, { selected: ["subagent", "echo"] });
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "run", prompt: "narrow", tools: ["echo"] }) }, call);
        const narrow = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await ownedBy(harness, narrow.id))[0] as Id;
        expect(await selectedOf(harness, child)).toEqual(["echo"]);
        const conversations = (await harness.storage.scanConversations({ limit: 100 })).items.length;
        const widened = await root.prompt(
          { input: subagentCall({ command: "run", prompt: "widen", tools: ["echo", "job"] }) },
          call,
        );
        expect(textOf(widened)).toContain(
          "a subagent's tools narrow yours and never widen them: job is not selected here (selected: subagent, echo)",
        );
        const results = await toolResults(harness, root.id);
        expect((results[1]?.model?.[0] as { isError?: boolean }).isError).toBe(true);
        expect((await harness.storage.scanConversations({ limit: 100 })).items.length).toBe(conversations);
        // Empty narrowing is allowed: a child with no tools.
        await root.prompt({ input: subagentCall({ command: "run", prompt: "none", tools: [] }) }, call);
        const none = (await tasksOf(harness, root.id, "tool"))[2]!;
        expect(await selectedOf(harness, (await ownedBy(harness, none.id))[0] as Id)).toEqual([]);
      }));

    it(`§8.5 ids the parent's tree does not own are refused (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness } = await openSubagents(storage);
        const root = await harness.root(call);
        const fork = await root.fork({ at: "start" }, call);
        for (const id of [root.id, fork.id]) {
          const refused = await root.prompt({ input: subagentCall({ command: "status", id }) }, call);
          expect(textOf(refused)).toContain(`conversation ${id} is not a subagent of this conversation`);
        }
        const missing = await root.prompt({ input: subagentCall({ command: "wait", id: 99_999 }) }, call);
        expect(textOf(missing)).toContain("subagent 99999 does not exist");
        // A grandchild (owned by a task of a child) belongs to the tree.
        await root.prompt(
          { input: subagentCall({ command: "run", prompt: subagentCall({ command: "spawn", prompt: "grandchild" }) }) },
          call,
        );
        const tool = (await tasksOf(harness, root.id, "tool")).at(-1)!;
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        const childTool = (await tasksOf(harness, child, "tool"))[0]!;
        const grandchild = (await ownedBy(harness, childTool.id))[0] as Id;
        expect(textOf(await root.prompt({ input: subagentCall({ command: "wait", id: grandchild }) }, call))).toBe(
          "grandchild",
        );
      }));

    it(`§8.5 context "inherit" gives the child exactly the parent's context at the last complete exchange before the launching one (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness } = await openSubagents(storage);
        const root = await harness.root(call);
        await root.prompt({ input: "first question" }, call);
        await root.prompt({ input: "second question" }, call);
        const entriesBefore = (await harness.entries(root.id, { limit: 100 }, call)).items;
        const boundary = entriesBefore.at(-1)!.id; // the final answer of the second exchange
        await root.prompt(
          { input: subagentCall({ command: "run", prompt: "what came before?", context: "inherit" }) },
          call,
        );
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await harness.conversation((await ownedBy(harness, tool.id))[0] as Id, call))!;
        expect(child.record).toEqual({
          id: child.id,
          owner: tool.id,
          parent: { conversationId: root.id, at: boundary },
        });
        const parentContext = (await root.contextEntries(boundary, call)).items;
        const childEntries = (await harness.entries(child.id, { limit: 100 }, call)).items;
        // The child's transcript: the parent's entries through the boundary, then its own.
        expect(childEntries.filter((e) => e.id <= boundary).map((e) => e.id)).toEqual(entriesBefore.map((e) => e.id));
        const childContext = (await child.contextEntries(undefined, call)).items;
        // Exactly the parent's context at the boundary (entries and the messages they project), then its own.
        expect(childContext.slice(0, parentContext.length).map((i) => [i.entry.id, i.messages])).toEqual(
          parentContext.map((i) => [i.entry.id, i.messages]),
        );
        const own = childContext
          .slice(parentContext.length)
          .map((i) => i.entry)
          .filter((e) => e.kind !== "system");
        expect(own.map((e) => [e.kind, textOf(e)])).toEqual([
          ["user", "what came before?"],
          ["assistant", "what came before?"],
        ]);
        expect(parentContext.map((i) => textOf(i.entry))).toEqual(
          expect.arrayContaining(["first question", "second question"]),
        );
        expect(childContext.map((i) => textOf(i.entry))).not.toContain(
          subagentCall({ command: "run", prompt: "what came before?", context: "inherit" }),
        );
      }));

    it(`§8.5 aborting the call during run marks the child's foreground tasks only: its queue is kept, the call gets an error result (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        const prompted = root.prompt({ input: subagentCall({ command: "run", prompt: `${HOLD} slow work` }) }, call);
        await fx.holding();
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await harness.conversation((await ownedBy(harness, tool.id))[0] as Id, call))!;
        const queued = await child.accept({ input: "later" }, call);
        expect(queued.status).toBe("queued");
        await harness.abortTask(tool.id, call);
        const answer = await prompted;
        await flush(harness);
        const settled = await harness.getTask(tool.id, call);
        expect(settled?.state.status).toBe("aborted");
        const results = await toolResults(harness, root.id);
        expect(results).toHaveLength(1);
        expect((results[0]?.model?.[0] as { isError?: boolean }).isError).toBe(true);
        expect(textOf(results[0])).toContain("the call was aborted");
        expect(textOf(answer)).toContain("the call was aborted");
        const gens = await tasksOf(harness, child.id, "generation");
        expect(gens[0]?.state.status).toBe("aborted");
        // The child's queue is preserved (§6.3): the follow-up is still queued, not withdrawn.
        expect(await child.result(queued.inputId, call)).toEqual({ status: "queued" });
        expect((await harness.storage.scanConversations({ ownedFrom: tool.id, limit: 10 })).items).toHaveLength(1);
      }));

    it(`Parent abort withdraws the child's queued followUps (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        const prompted = root.prompt({ input: subagentCall({ command: "run", prompt: `${HOLD} slow work` }) }, call);
        await fx.holding();
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await harness.conversation((await ownedBy(harness, tool.id))[0] as Id, call))!;
        const followUp = await child.accept({ input: "queued follow-up" }, call);
        const steer = await child.accept({ input: "queued steer", whenBusy: "steer" }, call);
        const write = await child.write(
          userKind,
          { model: [{ role: "user", content: "queued write", timestamp: 0 }] },
          call,
        );
        expect(followUp.status).toBe("queued");
        expect(steer.status).toBe("queued");
        expect(await child.result(write.inputId, call)).toEqual({ status: "queued" });
        // The public abort of the parent conversation (§6.3): one commit marks its foreground closure (the
        // call and the run child's running work) and withdraws queued steer/followUp in every conversation
        // of that closure, the child included; a queued write stays.
        const marks: number[] = [];
        harness.onCommit((commit) => {
          if (commit.batch.kind !== "main") return;
          const writes = commit.batch.writes;
          if (writes.some((w) => w.type === "patch" && w.abort === true)) marks.push(writes.length);
        });
        await root.abort(call);
        expect(marks).toHaveLength(1);
        expect(await child.result(followUp.inputId, call)).toMatchObject({ status: "unanswered", reason: "aborted" });
        expect(await child.result(steer.inputId, call)).toMatchObject({ status: "unanswered", reason: "aborted" });
        await prompted;
        await flush(harness);
        expect(textOf((await toolResults(harness, root.id))[0])).toContain("the call was aborted");
        expect((await harness.getTask(tool.id, call))?.state.status).toBe("aborted");
        expect((await tasksOf(harness, child.id, "generation"))[0]?.state.status).toBe("aborted");
        expect(await child.result(followUp.inputId, call)).toMatchObject({ status: "unanswered", reason: "aborted" });
        expect(await child.result(steer.inputId, call)).toMatchObject({ status: "unanswered", reason: "aborted" });
        // The next input placed into the child runs alone: the withdrawn ones never reach its transcript.
        fx.release();
        await root.prompt({ input: subagentCall({ command: "send", id: child.id, text: "next" }) }, call);
        await child.drive(call);
        const users = (await harness.entries(child.id, { limit: 50, kind: "user" }, call)).items.map(textOf);
        expect(users).toContain("next");
        expect(users).not.toContain("queued follow-up");
        expect(users).not.toContain("queued steer");
      }));

    it(`Delete rejects new work in the subtree (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        const parent = await root.fork({ at: "start" }, call);
        await parent.settings.set(
          { model: (await root.value(generationConfig.model).get(call))!, selectedTools: ["subagent", "echo"] },
          call,
        );
        // parent -> child (a run subagent) -> grandchild (a spawned subagent of the child), all settled.
        const answer = await parent.prompt(
          { input: subagentCall({ command: "run", prompt: subagentCall({ command: "spawn", prompt: "grandchild" }) }) },
          call,
        );
        expect(textOf(answer)).toMatch(/spawned subagent \d+/);
        const child = (await ownedBy(harness, (await tasksOf(harness, parent.id, "tool"))[0]!.id))[0] as Id;
        const grandchild = (await ownedBy(harness, (await tasksOf(harness, child, "tool"))[0]!.id))[0] as Id;
        const childHandle = (await harness.conversation(child, call))!;
        const grandchildHandle = (await harness.conversation(grandchild, call))!;
        await grandchildHandle.drive(call);
        await flush(harness);
        // A busy subtree still refuses the delete (§6.4), and nothing is deleted.
        const busy = grandchildHandle.prompt({ input: `${HOLD} busy` }, call);
        await fx.holding();
        await expect(harness.deleteConversation(parent.id, call)).rejects.toThrow(
          /live tasks or running invocations in its subtree/,
        );
        expect(await harness.conversation(grandchild, call)).toBeDefined();
        fx.release();
        await busy;
        await flush(harness);
        // One commit deletes the conversation and every conversation it owns, down the tree.
        const deletes: Id[][] = [];
        harness.onCommit((commit) => {
          if (commit.batch.kind !== "main") return;
          const ids = commit.batch.writes.flatMap((w) => (w.type === "deleteConversation" ? [w.id] : []));
          if (ids.length > 0) deletes.push(ids);
        });
        await harness.deleteConversation(parent.id, call);
        expect(deletes.map((ids) => [...ids].sort((a, b) => a - b))).toEqual([
          [parent.id, child, grandchild].sort((a, b) => a - b),
        ]);
        for (const id of [parent.id, child, grandchild]) expect(await harness.conversation(id, call)).toBeUndefined();
        // New work in the subtree is refused, through handles held from before too, and writes nothing.
        const before = harness.storage.lastSeq;
        await expect(childHandle.accept({ input: "more" }, call)).rejects.toThrow(/deleted|does not exist/);
        await expect(grandchildHandle.accept({ input: "more" }, call)).rejects.toThrow(/deleted|does not exist/);
        await expect(
          childHandle.write(userKind, { model: [{ role: "user", content: "note", timestamp: 0 }] }, call),
        ).rejects.toThrow(/deleted|does not exist/);
        expect(harness.storage.lastSeq).toBe(before);
        // The root is untouched and keeps working.
        expect(textOf(await root.prompt({ input: "still here" }, call))).toBe("still here");
      }));

    it(`§8.5 aborting the parent leaves a spawned child running (${backend.name})`, () =>
      backend.run(async (storage) => {
        const fx = await openSubagents(storage);
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} background work` }) }, call);
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await harness.conversation((await ownedBy(harness, tool.id))[0] as Id, call))!;
        await fx.holding();
        // The parent gets busy with another turn of its own, then is aborted.
        const busy = root.prompt({ input: `${HOLD} parent work` }, call);
        await fx.holding(2);
        await root.abort(call);
        await busy;
        const parentGens = await tasksOf(harness, root.id, "generation");
        expect(parentGens.at(-1)?.state.status).toBe("aborted");
        const childGen = (await tasksOf(harness, child.id, "generation"))[0]!;
        expect(childGen.abort).toBeUndefined();
        expect(childGen.role).not.toBe("terminal");
        fx.release();
        await child.drive(call);
        expect((await tasksOf(harness, child.id, "generation"))[0]?.state.status).toBe("done");
        const inputId = detailsOf((await toolResults(harness, root.id))[0]).inputId as Id;
        expect(await child.result(inputId, call)).toMatchObject({ status: "done" });
      }));
  });
  describe(`subagent blocking budget (${backend.name})`, () => {
    it(`Subagent run delegates after the blocking budget (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 1000 });
        const { harness } = fx;
        const root = await harness.root(call);
        const prompted = root.prompt({ input: subagentCall({ command: "run", prompt: `${HOLD} slow work` }) }, call);
        await fx.holding();
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(999);
        await flush(harness);
        const [running] = await tasksOf(harness, root.id, "tool");
        expect(running?.role).toBe("inflight");
        clock.advance(1);
        const answer = await prompted;
        // The call settled with the child's id; the child is still mid-turn.
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        expect(tool.state).toMatchObject({ status: "done" });
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        const results = await toolResults(harness, root.id);
        expect(results).toHaveLength(1);
        const data = dataOf(results[0]);
        expect(data.delegated).toBe(child);
        expect(data.isError).toBe(false);
        expect(data.diags).toEqual([
          {
            severity: "info",
            message: `still running as subagent ${child}; use subagent wait / status / stop`,
            code: "budget",
          },
        ]);
        expect(detailsOf(results[0])).toMatchObject({ id: child, command: "run", status: "running" });
        expect(textOf(results[0])).toContain(`still running as subagent ${child}`);
        expect(textOf(answer)).toContain(`subagent ${child} is still working`);
        const gen = (await tasksOf(harness, child, "generation"))[0]!;
        expect(gen.role).not.toBe("terminal");
        expect(gen.abort).toBeUndefined();
        // Aborting the parent after delegation leaves the child alone: its owner is terminal.
        const busy = root.prompt({ input: `${HOLD} parent work` }, call);
        await fx.holding(2);
        await root.abort(call);
        await busy;
        expect((await tasksOf(harness, root.id, "generation")).at(-1)?.state.status).toBe("aborted");
        const still = (await tasksOf(harness, child, "generation"))[0]!;
        expect(still.abort).toBeUndefined();
        expect(still.role).not.toBe("terminal");
        // The child's answer arrives after delegation; a later wait returns it.
        fx.release();
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toBe(`${HOLD} slow work`);
        const after = await toolResults(harness, root.id);
        expect(after.map(textOf).at(-1)).toBe(`${HOLD} slow work`);
        expect(detailsOf(after.at(-1))).toMatchObject({ id: child, command: "wait", status: "done" });
        // One child, one answer.
        expect(await ownedBy(harness, tool.id)).toEqual([child]);
        const answers = (await harness.entries(child, { limit: 50, kind: "assistant" }, call)).items;
        expect(answers.map(textOf)).toEqual([`${HOLD} slow work`]);
      }));

    it(`A delegated subagent run notifies its parent once (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 1000 });
        const { harness } = fx;
        const root = await harness.root(call);
        const prompted = root.prompt({ input: subagentCall({ command: "run", prompt: `${HOLD} slow work` }) }, call);
        await fx.holding();
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(1000);
        await prompted;
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        const inputId = detailsOf((await toolResults(harness, root.id))[0]).inputId as Id;
        const notices = async (): Promise<readonly Entry[]> =>
          (await harness.entries(root.id, { limit: 100, kind: "notice" }, call)).items;
        expect(await notices()).toEqual([]);
        // The child answers after delegation: the parent learns of it without polling (§8.3, §8.6), as a
        // notice entry with a stored SystemMessage the next generation reads, written in the child's
        // answering commit.
        fx.release();
        await (await harness.conversation(child, call))!.drive(call);
        await flush(harness);
        const [notice, ...more] = await notices();
        expect(more).toEqual([]);
        expect(notice?.data).toEqual({ subagent: { id: child, inputId, status: "done" } });
        expect(notice?.model?.[0]).toMatchObject({ role: "system" });
        expect(textOf(notice)).toContain(`Subagent ${child} answered input ${inputId}`);
        expect(textOf(notice)).toContain(`${HOLD} slow work`);
        // A later wait returns the same answer and writes no second notice; nor does the next turn.
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toBe(`${HOLD} slow work`);
        await root.prompt({ input: "and now?" }, call);
        expect(await notices()).toHaveLength(1);
      }));

    it(`A delegated subagent wait notifies its parent once, also when the child ends unanswered (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 500 });
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} long job` }) }, call);
        const child = (await ownedBy(harness, (await tasksOf(harness, root.id, "tool"))[0]!.id))[0] as Id;
        await fx.holding();
        const prompted = root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(500);
        await prompted;
        const inputId = detailsOf((await toolResults(harness, root.id))[1]).inputId as Id;
        // The child is stopped: its input ends unanswered, and the parent hears of that once.
        await root.prompt({ input: subagentCall({ command: "stop", id: child }) }, call);
        await (await harness.conversation(child, call))!.drive(call);
        await flush(harness);
        const notices = (await harness.entries(root.id, { limit: 100, kind: "notice" }, call)).items;
        expect(notices.map((e) => e.data)).toEqual([{ subagent: { id: child, inputId, status: "unanswered" } }]);
        expect(textOf(notices[0])).toContain(`Subagent ${child} did not answer input ${inputId}: aborted`);
      }));

    it(`The blocking budget is the generation's captured one, and a child inherits it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 60_000 });
        const { harness } = fx;
        const root = await harness.root(call);
        await root.settings.set({ budgetMs: 1000 }, call);
        // The turn's generation captures budgetMs 1000 when the input is accepted; the conversation's value
        // changes right after, before the call runs. The call keeps the captured budget.
        const accepted = await root.accept(
          { input: subagentCall({ command: "run", prompt: `${HOLD} slow work` }) },
          call,
        );
        await root.settings.set({ budgetMs: 50_000 }, call);
        const driving = root.drive(call);
        await fx.holding();
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        expect(tool.state).toMatchObject({ status: "running", budgetMs: 1000 });
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        // The child runs with the budget its call had.
        expect((await (await harness.conversation(child, call))!.settings.get(call))["budgetMs"]).toBe(1000);
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(1000);
        expect(await driving).toBe("idle");
        expect(await resultOf(harness, root.id, accepted.inputId)).toMatchObject({ status: "done" });
        expect(dataOf((await toolResults(harness, root.id))[0]).delegated).toBe(child);
        fx.release();
      }));

    it(`§8.3 stop cancels a run child after delegation; abort of the parent before that does not reach it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 1000 });
        const { harness } = fx;
        const root = await harness.root(call);
        const prompted = root.prompt(
          { input: subagentCall({ command: "run", prompt: `${HOLD} never answers` }) },
          call,
        );
        await fx.holding();
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(1000);
        await prompted;
        const tool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await ownedBy(harness, tool.id))[0] as Id;
        // The parent's abort has nothing of the child in its foreground closure any more.
        await root.abort(call);
        await flush(harness);
        expect((await tasksOf(harness, child, "generation"))[0]?.abort).toBeUndefined();
        // stop does cancel it.
        const stopped = await root.prompt({ input: subagentCall({ command: "stop", id: child }) }, call);
        expect(textOf(stopped)).toContain(`subagent ${child}: stop requested`);
        await (await harness.conversation(child, call))!.drive(call);
        expect((await tasksOf(harness, child, "generation")).map((t) => t.state.status)).toEqual(["aborted"]);
        const inputId = detailsOf((await toolResults(harness, root.id))[0]).inputId as Id;
        expect(await resultOf(harness, child, inputId)).toMatchObject({ status: "unanswered", reason: "aborted" });
      }));

    it(`Subagent wait delegates after the blocking budget (${backend.name})`, () =>
      backend.run(async (storage) => {
        const clock = new FakeClock();
        const fx = await openSubagents(storage, { clock, budgetMs: 500 });
        const { harness } = fx;
        const root = await harness.root(call);
        await root.prompt({ input: subagentCall({ command: "spawn", prompt: `${HOLD} long job` }) }, call);
        const spawnTool = (await tasksOf(harness, root.id, "tool"))[0]!;
        const child = (await ownedBy(harness, spawnTool.id))[0] as Id;
        await fx.holding();
        const prompted = root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        await eventually(harness, () => clock.pending > 0, "the budget timer");
        clock.advance(500);
        const answer = await prompted;
        const results = await toolResults(harness, root.id);
        expect(results).toHaveLength(2);
        const data = dataOf(results[1]);
        expect(data.delegated).toBe(child);
        expect(data.isError).toBe(false);
        expect(data.diags).toEqual([
          {
            severity: "info",
            message: `still running as subagent ${child}; use subagent wait / status / stop`,
            code: "budget",
          },
        ]);
        expect(detailsOf(results[1])).toMatchObject({ id: child, command: "wait", status: "running" });
        expect(textOf(answer)).toContain(`subagent ${child} is still working`);
        const gen = (await tasksOf(harness, child, "generation"))[0]!;
        expect(gen.role).not.toBe("terminal");
        expect(gen.abort).toBeUndefined();
        // The answer arrives later; the next wait (within its budget) returns it.
        fx.release();
        const waited = await root.prompt({ input: subagentCall({ command: "wait", id: child }) }, call);
        expect(textOf(waited)).toBe(`${HOLD} long job`);
        expect((await harness.entries(child, { limit: 50, kind: "assistant" }, call)).items.map(textOf)).toEqual([
          `${HOLD} long job`,
        ]);
        expect((await harness.storage.scanConversations({ limit: 10 })).items).toHaveLength(2);
      }));
  });
}

/** Counts the input-result rows that value scans return (the unbounded read `lastInput` used to make). */
class InputResultReads extends CountingStorage {
  scanned = 0;

  override async scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    const page = await super.scanValues(q);
    if (q.namespace === INPUT_RESULT_NAMESPACE) this.scanned += page.items.length;
    return page;
  }
}
