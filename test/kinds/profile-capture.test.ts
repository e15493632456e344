/**
 * A session's instructions from its profiles at the turn-kit level (docs/users.md "Instructions"): the
 * generation captures the version of its profile the session knows when it is created (TurnOptions.profileVersion),
 * and the host's system_instructions handler renders that version, so a retry carries what its attempt carried
 * even after the profile was edited; the next generation carries the edit as a delta.
 */
import type { Context } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/host.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { ProfileRecord } from "../../src/api/profiles.js";
import { instructionsOf } from "../../src/worker/platform/echo-model.js";
import { ProfileCache, profileHandler, registerProfileSection } from "../../src/worker/session/profiles.js";
import { coreBackends } from "../core/backends.js";
import { answerNewest, call, fauxAssistantMessage, openRig, transcript } from "./turn-race-fixtures.js";

/** A tenant's catalog of one profile, whose latest version a test moves on. */
class Catalog {
  readonly versions: ProfileRecord[] = [];

  put(text: string): void {
    this.versions.push({
      name: "support",
      version: this.versions.length + 1,
      sections: [{ id: "role", text }],
      createdAt: 0,
    });
  }

  source(): ConstructorParameters<typeof ProfileCache>[0] {
    return {
      latest: async (name) => (name === "support" ? this.versions.at(-1) : undefined),
      version: async (name, version) => (name === "support" ? this.versions[version - 1] : undefined),
    };
  }
}

function instructions(context: Context): string {
  return instructionsOf(context.messages);
}

for (const backend of coreBackends) {
  describe(`profiles at the turn kit (${backend.name})`, () => {
    it(`A generation in flight keeps the profile version it captured (${backend.name})`, () =>
      backend.run(async (inner) => {
        const catalog = new Catalog();
        catalog.put("You are version one.");
        const cache = new ProfileCache(catalog.source(), systemClock, (error) => {
          throw error;
        });
        await cache.refresh("support", 0);
        const rig = await openRig(
          inner,
          [fauxAssistantMessage([], { stopReason: "error", errorMessage: "503 overloaded" }), answerNewest()],
          { turn: { retryBaseMs: 1, retryJitter: 0, profileVersion: (name) => cache.head(name) } },
        );
        registerProfileSection(rig.kit.sections);
        profileHandler(rig.kit.hooks, rig.kit.generation, cache, async () => ({}));
        const root = await rig.harness.root(call);
        await root.commit((tx) => tx.value(generationConfig.profile).set("support"), call);

        // Created knowing version 1; the profile is edited (and read) before its first attempt.
        await root.accept({ input: "A" }, call);
        catalog.put("You are version two.");
        await cache.refresh("support", 0);
        expect(cache.head("support")).toBe(2);
        expect(await root.drive(call)).toBe("idle");
        // The failed attempt and its retry both carried the captured version.
        expect(rig.sent.map((sent) => instructions(sent.context))).toEqual([
          "You are version one.",
          "You are version one.",
        ]);

        // The next input's generation captures version 2: a delta after the baseline, not a rewrite of it.
        rig.provider.push(answerNewest());
        await root.accept({ input: "B" }, call);
        expect(await root.drive(call)).toBe("idle");
        expect(instructions(rig.sent[2]?.context as Context)).toBe("You are version two.");
        const system = (await transcript(rig)).filter((entry) => entry.kind === "system");
        expect(system.map((entry) => entry.model?.[0])).toEqual([
          expect.objectContaining({ role: "system", sections: { "edge.profile": "You are version one." } }),
          expect.objectContaining({ role: "system", sections: { "edge.profile": "You are version two." } }),
        ]);
      }));

    it(`A profile the directory cannot read for a moment reaches the first request once it answers (${backend.name})`, () =>
      backend.run(async (inner) => {
        const catalog = new Catalog();
        catalog.put("You are the agent.");
        let outage = 2;
        const reported: unknown[] = [];
        const source = catalog.source();
        const cache = new ProfileCache(
          {
            latest: async (name) => {
              if (outage-- > 0) throw new Error("directory unavailable");
              return source.latest(name);
            },
            version: source.version,
          },
          systemClock,
          (error) => reported.push(error),
        );
        const rig = await openRig(inner, [answerNewest()], {
          turn: { profileVersion: (name) => cache.head(name) },
        });
        registerProfileSection(rig.kit.sections);
        profileHandler(rig.kit.hooks, rig.kit.generation, cache, async () => ({}));
        const root = await rig.harness.root(call);
        await root.commit((tx) => tx.value(generationConfig.profile).set("support"), call);
        await cache.refresh("support", 0);
        expect(cache.failing("support")).toBe(true);
        await root.accept({ input: "A" }, call);
        expect(await root.drive(call)).toBe("idle");
        expect(reported).toHaveLength(2);
        expect(rig.sent.map((sent) => instructions(sent.context))).toEqual(["You are the agent."]);
      }));
  });
}
