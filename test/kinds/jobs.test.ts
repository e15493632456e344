/**
 * The job kind (§8.6), the job tool and the blocking budget with delegation (§8.3), and new_context, on
 * every core backend. Processes are the scripted fake ExecutionEnv on a FakeClock; crashes use
 * GateStorage (a fresh Harness over the same inner storage). The generation is the tool fixtures'
 * scripted stand-in, so exchanges are published exactly as a generation's settlement publishes them.
 */
import { describe, expect, it } from "vitest";
import { erase } from "../../src/core/task-kind.js";
import { noExecutionEnv } from "../../src/core/env.js";
import { FakeExecutionEnv, type Script } from "../../src/kinds/exec-fake.js";
import {
  createJobKind,
  jobDefinition,
  noticeRequest,
  readJobOutput,
  type JobInput,
  type JobState,
} from "../../src/kinds/job.js";
import type { AnyTool, ToolOutput, ToolRuntime } from "../../src/kinds/services.js";
import type { ToolOutputState, ToolStates } from "../../src/kinds/states.js";
import { bind } from "../../src/core/state.js";
import {
  applyEvent,
  applyMessage,
  previewOf,
  watchConversation,
  type ConversationEvent,
  type ConversationView,
} from "../../src/core/watch.js";
import { jobTool } from "../../src/tools/job.js";
import { newContextTool } from "../../src/tools/new-context.js";
import type { Entry, Id } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "../core/backends.js";
import { FakeClock, GateStorage } from "../core/driver-fixtures.js";
import {
  call,
  cancellable,
  flush,
  Gates,
  isErrorResult,
  openKit,
  resultOf,
  resultText,
  startExchange,
  task,
  toolCall,
  transcript,
  type Kit,
} from "./tool-fixtures.js";

interface JobRig {
  readonly kit: Kit;
  readonly env: FakeExecutionEnv;
  readonly clock: FakeClock;
  readonly gates: Gates;
}

async function openJobs(
  storage: Storage,
  options: {
    env?: FakeExecutionEnv;
    clock?: FakeClock;
    gates?: Gates;
    budgetMs?: number;
    tools?: readonly AnyTool[];
  } = {},
): Promise<JobRig> {
  const clock = options.clock ?? new FakeClock();
  const gates = options.gates ?? new Gates();
  const gated: Script = async (io) => {
    const key = io.args[0] ?? "job";
    io.print(`working ${key}\n`);
    await gates.get(key).promise;
    io.print(`finished ${key}\n`);
    return Number(io.args[1] ?? 0);
  };
  const env = options.env ?? new FakeExecutionEnv({ clock, scripts: { gated } });
  const kit = await openKit(storage, [jobTool as AnyTool, newContextTool as AnyTool, ...(options.tools ?? [])], {
    host: { clock },
    turn: { toolBudgetMs: options.budgetMs ?? 1000 },
    selected: ["job", "new_context", ...(options.tools ?? []).map((t) => t.name)],
    extraKinds: [erase(createJobKind({ env, flushMs: 0 }))],
  });
  await kit.h.attach(call);
  return { kit, env, clock, gates };
}

function startJob(rig: JobRig, input: Partial<JobInput> & { cmd: string }): Promise<Id> {
  const state: JobState = { status: "planned", cwd: "/workspace", ...input };
  return rig.kit.h.commit(
    (tx) => tx.task(jobDefinition, { conversationId: rig.kit.root, background: true, state }),
    call,
  );
}

async function jobState(rig: JobRig, id: Id): Promise<JobState> {
  return (await task(rig.kit, id)).state as JobState;
}

/** Re-read until `ok` holds, flushing the line between reads (bounded, no wall clock). */
async function eventually<T>(rig: JobRig, read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 300; i++) {
    const value = await read();
    if (ok(value)) return value;
    await flush(rig.kit.h, 2);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const status = (rig: JobRig, id: Id, wanted: JobState["status"]) =>
  eventually(
    rig,
    () => jobState(rig, id),
    (s) => s.status === wanted,
    `job ${id} ${wanted}`,
  );

function outputText(output: ToolOutputState): string {
  return output.content.map((part) => (part as { text?: string }).text ?? "").join("");
}

/** The job notices in the root's transcript: built-in `notice` entries with a stored SystemMessage (§2.1, §8.6). */
async function notices(rig: JobRig): Promise<Entry[]> {
  const transcriptEntries = await transcript(rig.kit);
  // None is written as a `system` entry (that kind is the managed section state's, §8.2).
  expect(
    transcriptEntries.filter(
      (e) => e.kind === "system" && typeof e.data === "object" && e.data !== null && "job" in e.data,
    ),
  ).toEqual([]);
  return transcriptEntries.filter(
    (e) => e.kind === "notice" && typeof e.data === "object" && e.data !== null && "job" in e.data,
  );
}

function noticeText(e: Entry): string {
  const message = e.model?.[0] as { content?: unknown } | undefined;
  return typeof message?.content === "string" ? message.content : "";
}

for (const backend of coreBackends) {
  describe(`jobs (${backend.name})`, () => {
    it(`a job runs, a reader sees its output live from scratch, and it settles exited with bounded output and the exit code (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const id = await startJob(rig, { cmd: "demo count 3 1000; exit 4", limits: { maxChars: 4 } });
        await status(rig, id, "running");
        const live = await eventually(
          rig,
          () => readJobOutput(rig.kit.h, id, call),
          (v) => v?.text === "1\n",
          "first line",
        );
        expect(live).toMatchObject({ status: "running", totalChars: 2 });
        rig.clock.advance(1000);
        await eventually(
          rig,
          () => readJobOutput(rig.kit.h, id, call),
          (v) => v?.totalChars === 4,
          "second line",
        );
        rig.clock.advance(1000);
        const done = await status(rig, id, "exited");
        if (done.status !== "exited") throw new Error("unreachable");
        expect(done.exitCode).toBe(4);
        expect(outputText(done.output)).toBe("2\n3\n");
        expect(done.output.truncation).toEqual({ totalChars: 6, retainedChars: 4, truncated: true });
        expect(await readJobOutput(rig.kit.h, id, call)).toMatchObject({
          status: "exited",
          text: "2\n3\n",
          exitCode: 4,
          truncated: true,
        });
      }));

    it(`output spills to scratch while the job runs: a watcher of its conversation sees it live as task_output, and the preview leaves when it settles (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const watch = await watchConversation(rig.kit.h, rig.kit.root, { tail: 10 }, call);
        const outputs: Extract<ConversationEvent, { type: "task_output" }>[] = [];
        watch.startCommits((message) => {
          for (const e of message.events) if (e.type === "task_output") outputs.push(e);
        });
        const id = await startJob(rig, { cmd: "demo count 3 1000" });
        await status(rig, id, "running");
        const shown = async (): Promise<string> => JSON.stringify(previewOf(watch.view, id) ?? null);
        await eventually(rig, shown, (p) => p.includes("1\\n"), "the first line in the watcher's view");
        expect(outputs.some((e) => e.task === id)).toBe(true);
        expect((await jobState(rig, id)).status).toBe("running");
        rig.clock.advance(1000);
        await eventually(rig, shown, (p) => p.includes("1\\n2\\n"), "the second line, live");
        expect((await jobState(rig, id)).status).toBe("running");
        rig.clock.advance(1000);
        await status(rig, id, "exited");
        await eventually(
          rig,
          async () => previewOf(watch.view, id),
          (p) => p === undefined,
          "the preview gone with the settlement",
        );
        watch.unsubscribe();
      }));

    it(`A one-shot job's last output rides on its settlement: no scratch commit writes it, and a watcher's preview holds it when the job ends, delivered with the settlement (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const scratchText: string[] = [];
        rig.kit.h.onCommit((c) => {
          if (c.batch.kind === "scratch") scratchText.push(JSON.stringify(c.batch.writes));
        });
        const watch = await watchConversation(rig.kit.h, rig.kit.root, { tail: 10 }, call);
        // A remote fold of the messages, event by event: its preview of the job as the job's task_end is
        // folded, and whether the message ending the job carried preview ops for it (before the end).
        let remote = JSON.parse(JSON.stringify(watch.view)) as ConversationView;
        let atEnd: string | undefined;
        let shownBeforeEnd: string | undefined;
        watch.startCommits((message) => {
          const outputs = new Set<Id>();
          let folding = remote;
          for (const e of message.events) {
            if (e.type === "task_output") outputs.add(e.task);
            if (e.type === "task_end" && e.task.kind === "job") {
              atEnd = JSON.stringify(previewOf(folding, e.task.id) ?? null);
              shownBeforeEnd = outputs.has(e.task.id) ? "with the settlement" : "before it";
            }
            folding = applyEvent(folding, e);
          }
          remote = applyMessage(remote, message);
        });
        const id = await startJob(rig, { cmd: "demo count 3 1000" });
        await status(rig, id, "running");
        await eventually(
          rig,
          async () => scratchText.join(""),
          (t) => t.includes("1\\n"),
          "the first line on scratch",
        );
        rig.clock.advance(1000);
        await eventually(
          rig,
          async () => scratchText.join(""),
          (t) => t.includes("2\\n"),
          "the second line on scratch",
        );
        rig.clock.advance(1000);
        const done = await status(rig, id, "exited");
        if (done.status !== "exited") throw new Error("unreachable");
        expect(outputText(done.output)).toBe("1\n2\n3\n");
        // The last line was printed as the process exited: the settlement carried it, unwritten, and the
        // watcher got it with the settlement commit (never before it was durable, §7.4).
        expect(scratchText.join("")).not.toContain("3\\n");
        expect(atEnd).toContain("1\\n2\\n3\\n");
        expect(shownBeforeEnd).toBe("with the settlement");
        watch.unsubscribe();
      }));

    it(`killed mid-output: abortTask settles killed and keeps the output captured before the kill (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const id = await startJob(rig, { cmd: "demo count 5 1000" });
        await status(rig, id, "running");
        rig.clock.advance(1000);
        await eventually(
          rig,
          () => readJobOutput(rig.kit.h, id, call),
          (v) => v?.text === "1\n2\n",
          "two lines",
        );
        await rig.kit.h.abortTask(id, call);
        const killed = await status(rig, id, "killed");
        if (killed.status !== "killed") throw new Error("unreachable");
        expect(outputText(killed.output)).toBe("1\n2\n");
        rig.clock.advance(10_000);
        await flush(rig.kit.h);
        expect(rig.env.started).toEqual(["demo count 5 1000"]);
      }));

    it(`Safe rerun after a kill (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const gates = new Gates();
        const rig = await openJobs(storage, { gates });
        const id = await startJob(rig, { cmd: "gated s", rerun: "safe" });
        await status(rig, id, "running");
        storage.crash();
        const again = await openJobs(storage.reopen(), { env: rig.env, gates });
        gates.open("s");
        const done = await status(again, id, "exited");
        if (done.status !== "exited") throw new Error("unreachable");
        expect(rig.env.started).toEqual(["gated s", "gated s"]);
        expect(outputText(done.output)).toBe("working s\nfinished s\n");
      }));

    it(`Lost job after a kill (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const gates = new Gates();
        const rig = await openJobs(storage, { gates });
        const id = await startJob(rig, { cmd: "gated l" });
        await status(rig, id, "running");
        // Its call returned early, so a notice was requested.
        await rig.kit.h.commit(
          (tx) => tx.value(noticeRequest(id)).set({ conversationId: rig.kit.root, callId: "c" }),
          call,
        );
        storage.crash();
        const again = await openJobs(storage.reopen(), { env: rig.env, gates });
        await status(again, id, "lost");
        expect(rig.env.started).toEqual(["gated l"]);
        const found = await notices(again);
        expect(found).toHaveLength(1);
        expect(noticeText(found[0] as Entry)).toContain(`Job ${id} (gated l) was lost`);
        expect(await again.kit.h.storage.getValue(bindNotice(id))).toBeUndefined();
      }));

    it(`Recurring job aborted while planned (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const id = await startJob(rig, { cmd: "echo tick", every: 1000, notBefore: rig.clock.now() + 1000 });
        await eventually(
          rig,
          async () => rig.clock.pending,
          (n) => n > 0,
          "the sleep",
        );
        await rig.kit.h.abortTask(id, call);
        const killed = await status(rig, id, "killed");
        expect(killed).toMatchObject({ status: "killed", every: 1000 });
        rig.clock.advance(5000);
        await flush(rig.kit.h);
        expect(rig.env.started).toEqual([]);
      }));

    it(`Recurring job aborted while running (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const id = await startJob(rig, { cmd: "gated r", every: 1000 });
        await status(rig, id, "running");
        await eventually(
          rig,
          () => readJobOutput(rig.kit.h, id, call),
          (v) => v?.text === "working r\n",
          "output",
        );
        await rig.kit.h.abortTask(id, call);
        const killed = await status(rig, id, "killed");
        if (killed.status !== "killed") throw new Error("unreachable");
        expect(outputText(killed.output)).toBe("working r\n");
        rig.gates.open("r");
        rig.clock.advance(5000);
        await flush(rig.kit.h);
        expect((await jobState(rig, id)).status).toBe("killed");
        expect(rig.env.started).toEqual(["gated r"]);
      }));

    it(`a recurring job loops planned -> running -> planned on the clock; after a long sleep it runs once and records the skipped occurrences (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const clock = new FakeClock();
        const rig = await openJobs(storage, { clock });
        const t0 = clock.now();
        const id = await startJob(rig, { cmd: "echo tick", every: 1000 });
        await eventually(
          rig,
          () => jobState(rig, id),
          (s) => s.status === "planned" && s.runs === 1,
          "first run",
        );
        expect(await jobState(rig, id)).toMatchObject({
          status: "planned",
          notBefore: t0 + 1000,
          runs: 1,
          lastExitCode: 0,
        });
        clock.advance(1000);
        await eventually(
          rig,
          () => jobState(rig, id),
          (s) => s.runs === 2,
          "second run",
        );
        expect(await jobState(rig, id)).toMatchObject({ status: "planned", notBefore: t0 + 2000 });
        // The object sleeps through 3.5 intervals: on wake it runs once, not a backlog.
        storage.crash();
        clock.advance(4500);
        const again = await openJobs(storage.reopen(), { env: rig.env, clock });
        await eventually(
          again,
          () => jobState(again, id),
          (s) => s.runs === 3,
          "the run after the sleep",
        );
        expect(await jobState(again, id)).toMatchObject({
          status: "planned",
          runs: 3,
          skipped: 3,
          notBefore: t0 + 6500,
        });
        expect(rig.env.started).toEqual(["echo tick", "echo tick", "echo tick"]);
        await again.kit.h.abortTask(id, call);
        await status(again, id, "killed");
      }));
  });

  describe(`the job tool and the blocking budget (${backend.name})`, () => {
    it(`a job that ends within the budget: the call's result is its output (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        const ex = await startExchange(rig.kit, [toolCall("job", { cmd: "echo hello" }, "c1")]);
        const result = await eventually(
          rig,
          () => resultOf(rig.kit, ex.tools[0] as Id).catch(() => undefined),
          (e) => e !== undefined,
          "result",
        );
        expect(resultText(result as Entry)).toBe("hello\n");
        expect(await notices(rig)).toHaveLength(0);
      }));

    it(`Notice after early return (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage, { budgetMs: 1000 });
        const ex = await startExchange(rig.kit, [toolCall("job", { cmd: "demo count 3 1000" }, "c1")]);
        const toolId = ex.tools[0] as Id;
        const jobId = await eventually(
          rig,
          async () => ((await task(rig.kit, toolId)).state as { jobId?: Id }).jobId,
          (j) => j !== undefined,
          "job id",
        );
        await eventually(
          rig,
          async () => rig.clock.pending,
          (n) => n >= 2,
          "the job's sleep and the budget",
        );
        rig.clock.advance(1000);
        const result = await eventually(
          rig,
          () => resultOf(rig.kit, toolId).catch(() => undefined),
          (e) => e !== undefined,
          "early result",
        );
        expect(resultText(result as Entry)).toContain(`still running as job ${jobId}`);
        expect((await task(rig.kit, toolId)).state).toMatchObject({ status: "done", output: { delegated: jobId } });
        expect(await notices(rig)).toHaveLength(0);
        rig.clock.advance(1000);
        await status(rig, jobId as Id, "exited");
        const found = await eventually(
          rig,
          () => notices(rig),
          (n) => n.length > 0,
          "the notice",
        );
        expect(found).toHaveLength(1);
        expect(noticeText(found[0] as Entry)).toContain(`Job ${jobId} (demo count 3 1000) exited with code 0`);
        expect(noticeText(found[0] as Entry)).toContain("1\n2\n3\n");
        expect(await rig.kit.h.storage.getValue(bindNotice(jobId as Id))).toBeUndefined();
      }));

    for (const order of [
      "Delegation settles before the job finishes",
      "Job finishes before delegation settles",
    ] as const) {
      it(`${order} (${backend.name})`, () =>
        backend.run(async (storage) => {
          const gates = new Gates();
          const delegator: AnyTool = {
            name: "delegator",
            description: "starts a job, gives it no budget, delegates, then waits for a gate before settling",
            parameters: { type: "object", properties: {} },
            async execute(_id, _params, out, rt, c) {
              const job = await rt.startJob({ cmd: "gated d" }, c);
              const done = await rt.waitForTask(job, { budgetMs: 0 }, c);
              out.write(`done=${done}`);
              out.delegate(job);
              gates.open("delegated");
              await cancellable(gates.get("tool").promise, c);
            },
          };
          const rig = await openJobs(storage, { gates, tools: [delegator] });
          const ex = await startExchange(rig.kit, [toolCall("delegator", {}, "c1")]);
          const toolId = ex.tools[0] as Id;
          await gates.get("delegated").promise;
          const jobId = await jobOf(rig, toolId);
          await status(rig, jobId, "running");
          if (order === "Delegation settles before the job finishes") {
            gates.open("tool");
            await eventually(
              rig,
              async () => (await task(rig.kit, toolId)).state.status,
              (s) => s === "done",
              "tool settled",
            );
            expect(await rig.kit.h.storage.getValue(bindNotice(jobId))).toMatchObject({
              value: { conversationId: rig.kit.root, callId: "c1" },
            });
            expect(await notices(rig)).toHaveLength(0);
            gates.open("d");
            await status(rig, jobId, "exited");
          } else {
            gates.open("d");
            await status(rig, jobId, "exited");
            expect(await notices(rig)).toHaveLength(0);
            gates.open("tool");
            await eventually(
              rig,
              async () => (await task(rig.kit, toolId)).state.status,
              (s) => s === "done",
              "tool settled",
            );
          }
          const found = await eventually(
            rig,
            () => notices(rig),
            (n) => n.length > 0,
            "the notice",
          );
          await flush(rig.kit.h);
          expect(await notices(rig)).toHaveLength(1);
          expect(noticeText(found[0] as Entry)).toContain(`Job ${jobId} (gated d) exited with code 0`);
          expect(noticeText(found[0] as Entry)).toContain("finished d");
          expect(await rig.kit.h.storage.getValue(bindNotice(jobId))).toBeUndefined();
        }));
    }

    it(`§10.2 Parent cleanup vs already-terminal job (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gates = new Gates();
        const starter: AnyTool = {
          name: "starter",
          description: "starts a job it would cancel on abort, then waits",
          parameters: { type: "object", properties: { key: { type: "string" } } },
          async execute(_id, params, _out, rt, c) {
            const key = String(params["key"]);
            await rt.startJob({ cmd: `gated ${key}` }, c);
            gates.open(`started ${key}`);
            await cancellable(gates.get(`tool ${key}`).promise, c);
          },
        };
        const rig = await openJobs(storage, { gates, tools: [starter] });
        // Order 1: the job is already terminal when the tool's cleanup asks to cancel it.
        const a = await startExchange(rig.kit, [toolCall("starter", { key: "a" }, "ca")]);
        await gates.get("started a").promise;
        const toolA = a.tools[0] as Id;
        const jobA = await jobOf(rig, toolA);
        expect((await task(rig.kit, toolA)).state).toMatchObject({ status: "running", cancelJobOnAbort: true });
        gates.open("a");
        await status(rig, jobA, "exited");
        await rig.kit.h.abortTask(toolA, call);
        await eventually(
          rig,
          async () => (await task(rig.kit, toolA)).state.status,
          (s) => s === "aborted",
          "tool a aborted",
        );
        expect((await jobState(rig, jobA)).status).toBe("exited");
        // Order 2: the job is live: the tool's cleanup kills it; its output is kept.
        const b = await startExchange(rig.kit, [toolCall("starter", { key: "b" }, "cb")]);
        await gates.get("started b").promise;
        const toolB = b.tools[0] as Id;
        const jobB = await jobOf(rig, toolB);
        await eventually(
          rig,
          () => readJobOutput(rig.kit.h, jobB, call),
          (v) => v?.text === "working b\n",
          "job b output",
        );
        await rig.kit.h.abortTask(toolB, call);
        const killed = await status(rig, jobB, "killed");
        if (killed.status !== "killed") throw new Error("unreachable");
        expect(outputText(killed.output)).toBe("working b\n");
        await eventually(
          rig,
          async () => (await task(rig.kit, toolB)).state.status,
          (s) => s === "aborted",
          "tool b aborted",
        );
        expect(rig.kit.h.driver.fault).toBeUndefined();
      }));

    it(`job stop of a job that exits in between uses the mark-if-live operation: already finished, no error (${backend.name})`, () =>
      backend.run(async () => {
        // A runtime where the job is running when read and exits before the mark: a read-then-mark
        // would try to mark a terminal task (refused); mark-if-live treats it as finished (§6.3).
        const out = sinkStub();
        const marks: Id[][] = [];
        let status: "running" | "exited" = "running";
        const runtime = toolRuntimeStub({
          jobOutput: async () => ({
            status,
            text: "",
            totalChars: 0,
            truncated: false,
            ...(status === "exited" ? { exitCode: 0 } : {}),
          }),
          abortTask: async () => {
            throw new Error("task 12 is not live; only live tasks can be marked for abort");
          },
          markIfLive: async (ids) => {
            marks.push([...ids]);
            status = "exited";
            return [];
          },
        });
        await jobTool.execute("c1", { command: "stop", id: 12 }, out.sink, runtime, call);
        expect(marks).toEqual([[12]]);
        expect(out.text()).toBe("job 12 already finished (exited)");
        expect(out.sink.details).toEqual({ job: 12, status: "exited" });
        // A live job: marked, stop requested.
        const live = sinkStub();
        await jobTool.execute(
          "c2",
          { command: "stop", id: 13 },
          live.sink,
          toolRuntimeStub({ markIfLive: async (ids) => [...ids] }),
          call,
        );
        expect(live.text()).toBe("job 13: stop requested");
      }));

    it(`An interrupted job call names its job and applies its policy (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const gates = new Gates();
        const rig = await openJobs(storage, { gates, budgetMs: 60_000 });
        const ex = await startExchange(rig.kit, [
          toolCall("job", { cmd: "gated i", rerun: "safe" }, "c1"),
          toolCall("job", { cmd: "gated j" }, "c2"),
        ]);
        const [safeCall, lostCall] = ex.tools as [Id, Id];
        const jobOfCall = async (toolId: Id): Promise<Id> =>
          (await eventually(
            rig,
            async () => ((await task(rig.kit, toolId)).state as { jobId?: Id }).jobId,
            (j) => j !== undefined,
            "job id",
          )) as Id;
        const safe = await jobOfCall(safeCall);
        const lost = await jobOfCall(lostCall);
        await status(rig, safe, "running");
        await status(rig, lost, "running");
        // The restart interrupts both calls (replay "never"). Each result names its job; a restart is not
        // an abort, so the job's own recovery policy applies: rerun "safe" runs again, otherwise lost.
        storage.crash();
        const again = await openJobs(storage.reopen(), { env: rig.env, gates, budgetMs: 60_000 });
        for (const [toolId, jobId] of [
          [safeCall, safe],
          [lostCall, lost],
        ] as const) {
          const result = await eventually(
            again,
            () => resultOf(again.kit, toolId).catch(() => undefined),
            (e) => e !== undefined,
            "the interrupted result",
          );
          expect(isErrorResult(result as Entry)).toBe(true);
          expect(resultText(result as Entry)).toContain("interrupted by a restart");
          expect(resultText(result as Entry)).toContain(
            `job ${jobId}, which this call started, continues under its own recovery policy`,
          );
          expect(resultText(result as Entry)).toContain(`use job wait / status / stop with id ${jobId}`);
        }
        await status(again, lost, "lost");
        gates.open("i");
        await status(again, safe, "exited");
        expect(rig.env.started.filter((c) => c === "gated i")).toHaveLength(2);
        expect(again.kit.h.driver.fault).toBeUndefined();
      }));

    it(`new_context requests a handoff that lands after the exchange, as a head with the message (${backend.name})`, () =>
      backend.run(async (storage) => {
        const rig = await openJobs(storage);
        await startExchange(rig.kit, [toolCall("new_context", { message: "continue with step 2" }, "n1")]);
        const handoff = await eventually(
          rig,
          async () => (await transcript(rig.kit)).find((e) => e.kind === "handoff"),
          (e) => e !== undefined,
          "the handoff",
        );
        const kinds = (await transcript(rig.kit)).map((e) => e.kind);
        expect(kinds.indexOf("handoff")).toBeGreaterThan(kinds.indexOf("tool_result"));
        expect(handoff?.data).toEqual({ text: "continue with step 2" });
      }));
  });
}

function bindNotice(jobId: Id) {
  return bind(noticeRequest(jobId), {});
}

async function jobOf(rig: JobRig, toolId: Id): Promise<Id> {
  const state = (await task(rig.kit, toolId)).state as ToolStates;
  if (state.status !== "running" || state.jobId === undefined) throw new Error(`tool ${toolId} has no job`);
  return state.jobId;
}

/** A sink that records what a tool writes (the job tool's text and details). */
function sinkStub(): { sink: ToolOutput; text: () => string } {
  let text = "";
  const sink: ToolOutput = {
    write: (t) => {
      text += t;
    },
    image: () => undefined,
    replace: (t) => {
      text = t;
    },
    details: {},
    usage: () => undefined,
    addTools: () => undefined,
    terminate: () => undefined,
    handoff: () => undefined,
    delegate: () => undefined,
    diag: () => undefined,
    capture: () => undefined,
  };
  return { sink, text: () => text };
}

/** A ToolRuntime whose job operations are given; the rest refuse. */
function toolRuntimeStub(overrides: Partial<ToolRuntime>): ToolRuntime {
  const refuse = (): never => {
    throw new Error("not in this stub");
  };
  return {
    taskId: 1,
    conversationId: 1,
    budgetMs: 1000,
    env: noExecutionEnv,
    now: () => 0,
    commit: refuse,
    conversation: refuse,
    abortTask: refuse,
    markIfLive: refuse,
    waitForTask: refuse,
    startJob: refuse,
    startRemoteCall: refuse,
    remoteCall: refuse,
    jobOutput: async () => ({ status: "running", text: "", totalChars: 0, truncated: false }),
    ...overrides,
  };
}
