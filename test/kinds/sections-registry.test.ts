/**
 * §9.6 with the turn kit installed: `h.sections` changes the kit's section registry (the one generations
 * snapshot before preparing) as Calls on the line; replacing a renderer through it marks the section for
 * recomputation; the registry cannot be swapped once the harness changed its sections.
 */
import { describe, expect, it } from "vitest";
import { defineSystemSection, SectionRegistry } from "../../src/kinds/sections.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { call, openTurns } from "./turn-fixtures.js";

describe("§9.6 sections through the harness", () => {
  it("§9.6 h.sections changes the turn kit's section registry on the line", async () => {
    const { harness, kit } = await openTurns(new MemoryStorage());
    // The built-ins the kit registered are what the harness sees.
    expect(harness.sections.names()).toEqual(["pi.identity", "pi.environment", "pi.skills"]);
    const policy = defineSystemSection<{ rules: string[] }>({
      key: "plugin.policy",
      render: (v) => v.rules.join("\n"),
    });
    const registered = await harness.sections.register(policy, call);
    expect(registered.render({ rules: ["a", "b"] })).toBe("a\nb"); // typed token retained
    expect(kit.sections.snapshot().definitions.get("plugin.policy")).toBe(policy);
    await expect(harness.sections.register(policy, call)).rejects.toMatchObject({ code: "conflict" });
    await harness.sections.replace(
      defineSystemSection<{ rules: string[] }>({ key: "plugin.policy", render: (v) => v.rules.join(", ") }),
      call,
    );
    expect([...kit.sections.snapshot().recompute.keys()]).toEqual(["plugin.policy"]);
    await harness.sections.remove("plugin.policy", call);
    expect(kit.sections.has("plugin.policy")).toBe(false);
    expect(() => harness.useSections(new SectionRegistry())).toThrow(/already changed/);
  });
});
