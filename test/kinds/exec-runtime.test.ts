/**
 * `env: ExecutionEnv` on TaskRuntime and ToolRuntime (§5.2, §9.3): the harness's environment, FileSystem
 * & Shell, reached by task and tool code as `runtime.env`; a harness opened without one rejects with a
 * clear error. And `ToolOutput.capture(metadata)` (§9.3, provisional): totals and a spill path without
 * resending text, which the harness's own truncation diagnostic reports.
 */
import { describe, expect, it } from "vitest";
import { Harness } from "../../src/core/harness.js";
import type { JsonObject } from "../../src/storage/records.js";
import { erase } from "../../src/core/task-kind.js";
import { FakeExecutionEnv } from "../../src/kinds/exec-fake.js";
import type { AnyTool } from "../../src/kinds/services.js";
import { readToolData } from "../../src/kinds/stored.js";
import type { StoredToolData } from "../../src/kinds/states.js";
import { coreBackends } from "../core/backends.js";
import { FakeClock, flush, settleStep, stepKind } from "../core/driver-fixtures.js";
import {
  call,
  isErrorResult,
  openKit,
  resultOf,
  resultText,
  startExchange,
  toolCall,
  type Kit,
} from "./tool-fixtures.js";

/** A tool over runtime.env's FileSystem half: reads a file, keeps its last `keep` characters, captures the rest. */
const catTool: AnyTool = {
  name: "cat",
  description: "print the tail of a file, and write a copy next to it",
  parameters: {
    type: "object",
    properties: { path: { type: "string" }, keep: { type: "integer" } },
    required: ["path"],
  },
  async execute(_id, params: JsonObject, out, runtime) {
    const path = String(params["path"]);
    const keep = typeof params["keep"] === "number" ? params["keep"] : Number.MAX_SAFE_INTEGER;
    const text = await runtime.env.readFile(path);
    await runtime.env.writeFile(`${path}.copy`, text);
    out.replace(text.slice(Math.max(0, text.length - keep)));
    // The whole text stays in the file: the result says how much there was and where, without resending it.
    out.capture({ totalChars: text.length, ...(text.length > keep ? { spillPath: `${path}.copy` } : {}) });
  },
};

async function resultWhenSettled(kit: Kit, toolId: number) {
  for (let i = 0; i < 200; i++) {
    const found = await resultOf(kit, toolId).catch(() => undefined);
    if (found !== undefined) return found;
    await flush(kit.h, 2);
  }
  throw new Error("the tool never settled");
}

for (const backend of coreBackends) {
  describe(`runtime.env (${backend.name})`, () => {
    it(`a task's runtime.env is the harness's ExecutionEnv (§5.2) (${backend.name})`, () =>
      backend.run(async (storage) => {
        const env = new FakeExecutionEnv({ clock: new FakeClock(), files: { "in.txt": "from the env" } });
        const seen: string[] = [];
        const reader = stepKind("reader", {
          execute: async (task, runtime, c) => {
            expect(runtime.env).toBe(env);
            seen.push(await runtime.env.readFile("/workspace/in.txt"));
            await runtime.env.writeFile("out.txt", `task ${task.id} was here`);
            seen.push((await runtime.env.exec("echo shell half", {})).output);
            await settleStep(runtime, task, "done", c);
          },
        });
        const h = await Harness.open(storage, { taskKinds: [erase(reader)], env }, call);
        const root = await h.root(call);
        const id = await root.commit(
          (tx) => tx.task(reader, { state: { status: "pending", tag: "r", refs: [] } }),
          call,
        );
        await root.drive(call);
        expect(seen).toEqual(["from the env", "shell half\n"]);
        expect(await env.readFile("out.txt")).toBe(`task ${id} was here`);
      }));

    it(`without an env, runtime.env rejects naming what is missing (${backend.name})`, () =>
      backend.run(async (storage) => {
        const errors: string[] = [];
        const reader = stepKind("reader", {
          execute: async (task, runtime, c) => {
            await runtime.env.readFile("x").catch((e: unknown) => errors.push((e as Error).message));
            await runtime.env.exec("echo", {}).catch((e: unknown) => errors.push((e as Error).message));
            await settleStep(runtime, task, "done", c);
          },
        });
        const h = await Harness.open(storage, { taskKinds: [erase(reader)] }, call);
        const root = await h.root(call);
        await root.commit((tx) => tx.task(reader, { state: { status: "pending", tag: "r", refs: [] } }), call);
        await root.drive(call);
        expect(errors).toEqual([
          "this harness has no execution environment (HarnessOptions.env), so it cannot read files",
          "this harness has no execution environment (HarnessOptions.env), so it cannot run commands",
        ]);
      }));

    it(`a tool's runtime.env (§9.3) and out.capture: the truncation totals and spill path reach the result without the text (${backend.name})`, () =>
      backend.run(async (storage) => {
        const env = new FakeExecutionEnv({
          clock: new FakeClock(),
          files: { "log.txt": "line one\nline two\nline three\n", "short.txt": "ok" },
        });
        const kit = await openKit(storage, [catTool], { selected: ["cat"], env });
        await kit.h.attach(call);
        const ex = await startExchange(kit, [
          toolCall("cat", { path: "log.txt", keep: 11 }, "c1"),
          toolCall("cat", { path: "short.txt" }, "c2"),
        ]);
        const long = await resultWhenSettled(kit, ex.tools[0] as number);
        expect(isErrorResult(long)).toBe(false);
        expect(resultText(long)).toBe(
          "line three\n\n<harness>\n[warn] output truncated: showing the last 11 of 29 characters; full output at log.txt.copy\n</harness>",
        );
        const data = readToolData((long.data ?? {}) as StoredToolData);
        expect(data.truncation).toEqual({ totalChars: 29, retainedChars: 11, truncated: true });
        expect(await env.readFile("log.txt.copy")).toBe("line one\nline two\nline three\n");
        // Nothing cut, no spill: no diagnostic, totals as written.
        const short = await resultWhenSettled(kit, ex.tools[1] as number);
        expect(resultText(short)).toBe("ok");
        expect(readToolData((short.data ?? {}) as StoredToolData).truncation).toEqual({
          totalChars: 2,
          retainedChars: 2,
          truncated: false,
        });
        // A missing file is the call's error result, naming the path.
        const missing = await startExchange(kit, [toolCall("cat", { path: "nope.txt" }, "c3")]);
        const failed = await resultWhenSettled(kit, missing.tools[0] as number);
        expect(isErrorResult(failed)).toBe(true);
        expect(resultText(failed)).toContain("no such file: /workspace/nope.txt");
      }));
  });
}
