/**
 * spawn with the built-in turn kinds (§4.3, §8.5, §9.1): a tool spawns a child whose first generation,
 * created in the spawning commit with the child's copied config, answers the prompt; the tool drives it
 * and reads the result by the prompt's inputId.
 */
import { describe, expect, it } from "vitest";
import { generationConfig } from "../../src/kinds/config.js";
import type { AnyTool } from "../../src/kinds/services.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { call, fauxAssistantMessage, fauxToolCall, openTurns, textOf } from "./turn-fixtures.js";

for (const backend of coreBackends) {
  describe(`spawn with turn kinds (${backend.name})`, () => {
    it(`§8.5 a tool spawns a child whose first generation answers the prompt with the inherited model (${backend.name})`, () =>
      backend.run(async (storage) => {
        let childId: Id | undefined;
        const subagent: AnyTool = {
          name: "subagent",
          description: "Runs a child conversation.",
          parameters: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
          async execute(_id, params, out, rt, c) {
            const from = await rt.conversation(rt.conversationId, c);
            const spawned = await rt.commit(
              (tx) =>
                from!.spawnIn(tx.builder, {
                  prompt: String(params["prompt"]),
                  values: { inherit: [generationConfig.model], set: [[generationConfig.selectedTools, []]] },
                }),
              c,
            );
            childId = spawned.conversationId;
            const child = await rt.conversation(spawned.conversationId, c);
            const driven = await child!.drive(c);
            const result = await child!.result(spawned.inputId, c);
            out.write(
              `${driven}: ${result?.status ?? "none"} ${result?.status === "done" && result.answer !== undefined ? "with answer" : "without answer"}`,
            );
          },
        };
        const { harness } = await openTurns(storage, {
          tools: [subagent],
          responses: [
            fauxAssistantMessage([fauxToolCall("subagent", { prompt: "count to two" }, { id: "c1" })], {
              stopReason: "toolUse",
            }),
            fauxAssistantMessage("one, two"),
            fauxAssistantMessage("the child counted"),
          ],
        });
        const root = await harness.root(call);
        await root.settings.set({ selectedTools: ["subagent"] }, call);
        const answer = await root.prompt({ input: "delegate" }, call);
        expect(textOf(answer)).toBe("the child counted");
        const toolResult = (await harness.entries(root.id, { limit: 20, kind: "tool_result" }, call)).items[0];
        expect(textOf(toolResult)).toBe("idle: done with answer");
        const child = (await harness.conversation(childId as Id, call))!;
        expect(child.record.owner).toBeDefined();
        expect(await child.settings.get(call)).toMatchObject({
          model: await root.value(generationConfig.model).get(call),
          selectedTools: [],
        });
        const entries = (await harness.entries(child.id, { limit: 20 }, call)).items;
        expect(entries.map((e) => e.kind)).toContain("user");
        expect(textOf(entries.find((e) => e.kind === "assistant"))).toBe("one, two");
        const owner = await harness.getTask(child.record.owner as Id, call);
        expect(owner?.kind).toBe("tool");
        expect(owner?.owns).toEqual([child.id]);
      }));
  });
}
