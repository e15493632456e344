/**
 * What a request offers the model and what the model may call (§8.2, §8.3, §8.7), through the real
 * generation kind on the faux provider: the selected tools reach the request as complete definitions
 * in a system message (no supplied list would mean no tools), a call to a registered tool the request
 * did not offer never runs, and the generation's hook points carry their §8.7 inputs with the kit's
 * own types (a plugin needs no casts).
 */
import {
  fauxAssistantMessage,
  fauxToolCall,
  type Context,
  type FauxResponseStep,
  type SystemMessage,
} from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { generationConfig } from "../../src/kinds/config.js";
import { systemSections } from "../../src/kinds/sections.js";
import type { AnyTool } from "../../src/kinds/services.js";
import { coreBackends } from "../core/backends.js";
import { call, echoTool, openRig, tasksOfKind, transcript } from "./turn-race-fixtures.js";

/** A faux step that records the request it answered. */
function recording(requests: Context[], answer: () => ReturnType<typeof fauxAssistantMessage>): FauxResponseStep {
  return (context) => {
    requests.push(structuredClone(context));
    return answer();
  };
}

function offeredTools(request: Context | undefined): string[] {
  const names: string[] = [];
  for (const m of request?.messages ?? []) {
    if (m.role !== "system") continue;
    const system = m as SystemMessage;
    for (const t of system.toolsRemoved ?? []) names.splice(names.indexOf(t.name), 1);
    for (const t of system.toolsAdded ?? []) names.push(t.name);
  }
  return names;
}

for (const backend of coreBackends) {
  describe(`offered tools and generation hook inputs (${backend.name})`, () => {
    it(`the selected tools are offered to the model as complete definitions in a system message; the request stays messages-only (${backend.name})`, () =>
      backend.run(async (inner) => {
        const requests: Context[] = [];
        const rig = await openRig(inner, [recording(requests, () => fauxAssistantMessage("hi"))]);
        const root = await rig.harness.root(call);
        await root.prompt({ input: "hello" }, call);
        const request = requests[0];
        expect(request).toBeDefined();
        // Messages-only is checked on what the generation handed to pi-ai: the provider sees a
        // normalized context, which would hide a `tools` or `systemPrompt` field pico had sent.
        const streamed = rig.sent.filter((s) => s.method === "stream" || s.method === "streamSimple");
        expect(streamed).toHaveLength(1);
        expect(Object.keys(streamed[0]?.context ?? { missing: true })).toEqual(["messages"]);
        const system = request?.messages.find((m) => m.role === "system") as SystemMessage | undefined;
        expect(system?.toolsAdded).toEqual([
          { name: echoTool.name, description: echoTool.description, parameters: echoTool.parameters },
        ]);
        // The baseline is a durable system entry before the request cutoff.
        expect((await transcript(rig)).map((e) => e.kind)).toEqual(["user", "system", "assistant"]);
      }));

    it(`a call to a registered tool the request did not offer gets its own error result and never runs; the turn answers (${backend.name})`, () =>
      backend.run(async (inner) => {
        let ran = 0;
        const secret: AnyTool = {
          name: "secret",
          description: "registered but not selected",
          parameters: { type: "object", properties: {} },
          async execute(_id, _params, out) {
            ran += 1;
            out.write("leaked");
          },
        };
        const requests: Context[] = [];
        const rig = await openRig(
          inner,
          [
            recording(requests, () =>
              fauxAssistantMessage(
                [fauxToolCall("secret", {}, { id: "c1" }), fauxToolCall("echo", { text: "ok" }, { id: "c2" })],
                { stopReason: "toolUse" },
              ),
            ),
            recording(requests, () => fauxAssistantMessage("done")),
          ],
          { tools: [echoTool, secret] },
        );
        const root = await rig.harness.root(call);
        await root.commit((tx) => tx.value(generationConfig.selectedTools).set(["echo"]), call);
        const answer = await root.prompt({ input: "try" }, call);
        expect(answer).toBeDefined();
        expect(ran).toBe(0);
        expect(offeredTools(requests[0])).toEqual(["echo"]);
        const results = (await transcript(rig)).filter((e) => e.kind === "tool_result");
        const byKey = new Map(results.map((e) => [e.key, e.model?.[0]]));
        expect(byKey.get("c1")).toMatchObject({
          isError: true,
          content: [{ type: "text", text: 'Tool "secret" was not offered in this request.' }],
        });
        expect(byKey.get("c2")).toMatchObject({ isError: false });
        const tools = await tasksOfKind(rig, "tool");
        expect(tools.map((t) => (t.state as { status: string }).status)).toEqual(["done", "done"]);
      }));

    it(`a page's run tools are offered to every request of the input's turn, and not to the next turn (${backend.name})`, () =>
      backend.run(async (inner) => {
        const requests: Context[] = [];
        const rig = await openRig(inner, [
          recording(requests, () =>
            fauxAssistantMessage([fauxToolCall("echo", { text: "ok" }, { id: "c1" })], { stopReason: "toolUse" }),
          ),
          recording(requests, () => fauxAssistantMessage("done")),
          recording(requests, () => fauxAssistantMessage("later")),
        ]);
        const root = await rig.harness.root(call);
        const pick = {
          name: "pick_color",
          description: "ask the page",
          parameters: { type: "object", properties: {} },
        };
        // The kinds' accept options (placement.ts) carry the run tools; the core's type does not name them.
        const withTools = { input: "go", runTools: [pick] };
        const turns = rig.harness.turns;
        if (turns === undefined) throw new Error("the kit installs the turn API");
        await turns.accept(root.id, withTools, call);
        expect(await root.drive(call)).toBe("idle");
        expect(offeredTools(requests[0])).toEqual(["echo", "pick_color"]);
        // After the tool result, the same turn's next request still offers it.
        expect(offeredTools(requests[1])).toEqual(["echo", "pick_color"]);
        await root.prompt({ input: "next" }, call);
        expect(offeredTools(requests[2])).toEqual(["echo"]);
        const generations = await tasksOfKind(rig, "generation");
        expect(generations).toHaveLength(3);
      }));

    it(`an input with run tools accepted while a turn is live is queued and placed as a group of its own, with its tools (${backend.name})`, () =>
      backend.run(async (inner) => {
        const requests: Context[] = [];
        const rig = await openRig(inner, [
          recording(requests, () => fauxAssistantMessage("live")),
          recording(requests, () => fauxAssistantMessage("before")),
          recording(requests, () => fauxAssistantMessage("with tools")),
          recording(requests, () => fauxAssistantMessage("after")),
        ]);
        const root = await rig.harness.root(call);
        const pick = {
          name: "pick_color",
          description: "ask the page",
          parameters: { type: "object", properties: {} },
        };
        const turns = rig.harness.turns;
        if (turns === undefined) throw new Error("the kit installs the turn API");
        // The first accept starts a turn; the three after it are queued behind it (followUps).
        await turns.accept(root.id, { input: "live" }, call);
        await turns.accept(root.id, { input: "before" }, call);
        // The kinds' accept options carry the run tools (the core's type does not name them); it asks to steer, and
        // is queued as a followUp all the same: its tools are its own turn's.
        const withTools = { input: "with tools", runTools: [pick], whenBusy: "steer" as const };
        await turns.accept(root.id, withTools, call);
        await turns.accept(root.id, { input: "after" }, call);
        expect(await root.drive(call)).toBe("idle");
        // Four groups, in order: the page's tools only in the turn of the input that offered them.
        const users = requests.map((request) =>
          request.messages
            .filter((m) => m.role === "user")
            .map((m) => (typeof m.content === "string" ? m.content : "")),
        );
        expect(users.map((texts) => texts[texts.length - 1])).toEqual(["live", "before", "with tools", "after"]);
        expect(requests.map(offeredTools)).toEqual([["echo"], ["echo"], ["echo", "pick_color"], ["echo"]]);
      }));

    it(`system_instructions on the kit's generation kind gets the typed draft; after_response gets the attempt's usage (${backend.name})`, () =>
      backend.run(async (inner) => {
        const requests: Context[] = [];
        const rig = await openRig(inner, [recording(requests, () => fauxAssistantMessage("hi"))]);
        const seen: { usage: unknown; responseUsage: unknown }[] = [];
        // No casts: the kit's hook types name the draft and the usage (§8.7).
        rig.kit.hooks.on(rig.kit.generation, "system_instructions", ({ sections, config }) => {
          sections.set(systemSections.identity, `You are a test agent on ${config.model}.`);
        });
        // after_response fails open, so an expect inside it would be swallowed: collect, assert below.
        rig.kit.hooks.on(rig.kit.generation, "after_response", ({ response, usage }) => {
          seen.push({ usage, responseUsage: response.usage });
        });
        const root = await rig.harness.root(call);
        await root.prompt({ input: "hello" }, call);
        const system = requests[0]?.messages.find((m) => m.role === "system") as SystemMessage | undefined;
        expect(JSON.stringify(system?.sections ?? system?.content)).toContain(
          `You are a test agent on ${rig.modelId}.`,
        );
        expect(seen).toHaveLength(1);
        expect(seen[0]?.usage).toBe(seen[0]?.responseUsage);
        expect(seen[0]?.usage).toMatchObject({ input: expect.any(Number), output: expect.any(Number) });
      }));
  });
}
