/**
 * GUPP for conversation agents over HTTP (seed 000 "GUPP Integration"): an idle agent's hook
 * is activated and its work accepted in the setting commit; a busy one stays pending and is activated
 * right after its conversation's answer; the final answer completes the hook once; an eviction between
 * set and activation still activates once and accepts once; at the boundary where the conversation
 * becomes idle, a pending hook's work item goes ahead of the user's queued followUps.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { bind } from "../../src/core/state.js";
import { erase } from "../../src/core/task-kind.js";
import { hookValue } from "../../src/rig/state.js";
import { registerTestKinds, resetTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, json, stubOf, token, uniqueSession, until } from "./http-fixtures.js";
import { contractKind, harnessOf, call as background } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TENANT = "gupp";
const LONG = "a user question long enough that the paced echo model keeps the conversation busy for a while ...";

interface Setup {
  readonly name: string;
  readonly path: (rest: string) => string;
  readonly mayor: string;
  readonly user: string;
  readonly conversationId: number;
  hook(): Promise<{ status: string; work_item: { bead_id: string } | null }>;
  workInputs(): Promise<number>;
  userTexts(): Promise<string[]>;
}

async function setup(label: string): Promise<Setup> {
  const name = uniqueSession(label);
  const mayor = await token(TENANT, "mayor");
  const user = await token(TENANT, "client");
  const path = (rest: string): string => `/v1/sessions/${name}${rest}`;
  expect((await call("PUT", path(""), { token: user, body: { model: "echo-slow" } })).status).toBe(201);
  const registered = await json<{ agent: { conversationId: number } }>(
    await call("PUT", path("/rig/agents/polecat-alpha"), {
      token: mayor,
      body: { role: "polecat", conversation: "new" },
    }),
  );
  const conversationId = registered.agent.conversationId;
  return {
    name,
    path,
    mayor,
    user,
    conversationId,
    hook: async () => json(await call("GET", path("/rig/agents/polecat-alpha/hook"), { token: mayor })),
    workInputs: async () => {
      const page = await json<{ items: { kind: string; model?: { content: unknown }[] }[] }>(
        await call("GET", path(`/conversations/${conversationId}/entries?limit=100`), { token: user }),
      );
      return page.items.filter((e) => e.kind === "user" && JSON.stringify(e.model).includes("Work item gt-1")).length;
    },
    userTexts: async () => {
      const page = await json<{ items: { kind: string; model?: { content: unknown }[] }[] }>(
        await call("GET", path(`/conversations/${conversationId}/entries?limit=100`), { token: user }),
      );
      return page.items
        .filter((e) => e.kind === "user")
        .map((e) => (typeof e.model?.[0]?.content === "string" ? e.model[0].content : JSON.stringify(e.model)));
    },
  };
}

describe("GUPP on a busy conversation", () => {
  it("an idle conversation agent's hook is activated and its work accepted in the setting commit, and the answer completes it", async () => {
    const s = await setup("idle");
    const set = await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
      token: s.mayor,
      body: { bead_id: "gt-1", title: "short" },
    });
    const body = await json(set);
    expect(body, JSON.stringify(body)).toMatchObject({ status: "active" });
    await until(
      async () => ((await s.hook()).status === "completed" ? true : undefined),
      "the hook completed by the answer",
      1000,
    );
    expect(await s.workInputs()).toBe(1);
  });

  it("pending while the agent's conversation answers a user; activated right after; completed once", async () => {
    const s = await setup("busy");
    const accepted = await call("POST", s.path(`/conversations/${s.conversationId}/inputs`), {
      token: s.user,
      body: { input: LONG },
    });
    expect(accepted.status).toBe(201);
    const set = await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
      token: s.mayor,
      body: { bead_id: "gt-1", title: "short" },
    });
    expect(await json(set)).toMatchObject({ status: "pending" });
    expect(await s.workInputs()).toBe(0);
    await until(async () => ((await s.hook()).status !== "pending" ? true : undefined), "activation", 1000);
    // The user's input was answered first; then the work item was accepted.
    const input = await json<{ result: { status: string } }>(
      await call("GET", s.path(`/inputs/${(await json<{ inputId: number }>(accepted)).inputId}`), { token: s.user }),
    );
    expect(input.result.status).toBe("done");
    await until(async () => ((await s.hook()).status === "completed" ? true : undefined), "completion", 1000);
    expect(await s.workInputs()).toBe(1);
  }, 30_000);

  it("the object evicted between set and activation: activated once, accepted once", async () => {
    const s = await setup("evict");
    expect(
      (
        await call("POST", s.path(`/conversations/${s.conversationId}/inputs`), {
          token: s.user,
          body: { input: LONG },
        })
      ).status,
    ).toBe(201);
    expect(
      await json(
        await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
          token: s.mayor,
          body: { bead_id: "gt-1", title: "short" },
        }),
      ),
    ).toMatchObject({ status: "pending" });
    await abortAllDurableObjects();
    // The next request reopens the object: the interrupted turn is retried, then the pending hook activates.
    await until(
      async () => ((await s.hook()).status === "completed" ? true : undefined),
      "activation and completion after the restart",
      1000,
    );
    expect(await s.workInputs()).toBe(1);
    const hook = await call("GET", s.path("/rig/agents/polecat-alpha/hook"), { token: s.mayor });
    expect(hook.headers.get("hook-attempt")).toBe("1");
  }, 30_000);
});

describe("Pending hook goes ahead of queued followUps", () => {
  it("at the final answer of the user's turn the hook's work item is placed as the next group before the queued followUp, and completes once", async () => {
    const s = await setup("ahead");
    const first = await call("POST", s.path(`/conversations/${s.conversationId}/inputs`), {
      token: s.user,
      body: { input: LONG },
    });
    expect(first.status).toBe(201);
    expect(
      await json(
        await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
          token: s.mayor,
          body: { bead_id: "gt-1", title: "short" },
        }),
      ),
    ).toMatchObject({ status: "pending" });
    const followUp = await json<{ inputId: number; status: string }>(
      await call("POST", s.path(`/conversations/${s.conversationId}/inputs`), {
        token: s.user,
        body: { input: "a queued follow-up" },
      }),
    );
    expect(followUp.status).toBe("queued");
    await until(
      async () => {
        const input = await json<{ result: { status: string } }>(
          await call("GET", s.path(`/inputs/${followUp.inputId}`), { token: s.user }),
        );
        return input.result.status === "done" && (await s.hook()).status === "completed" ? true : undefined;
      },
      "the follow-up answered and the hook completed",
      2000,
    );
    expect(await s.userTexts()).toEqual([LONG, "Work item gt-1: short", "a queued follow-up"]);
    expect(await s.workInputs()).toBe(1);
    const hook = await call("GET", s.path("/rig/agents/polecat-alpha/hook"), { token: s.mayor });
    expect(hook.headers.get("hook-attempt")).toBe("1");
  }, 60_000);
});

describe("GUPP after replacement", () => {
  it("GUPP places the work of a replaced agent", async () => {
    const s = await setup("replaced");
    expect(
      await json(
        await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
          token: s.mayor,
          body: { bead_id: "gt-1", title: "short" },
        }),
      ),
    ).toMatchObject({ status: "active" });
    await until(
      async () => ((await s.hook()).status === "completed" ? true : undefined),
      "the first work completed",
      1000,
    );
    expect((await call("DELETE", s.path("/rig/agents/polecat-alpha/hook"), { token: s.mayor })).status).toBe(200);
    expect((await call("DELETE", s.path("/rig/agents/polecat-alpha"), { token: s.mayor })).status).toBe(200);

    // The replacement: the same agent id on a new conversation.
    const registered = await json<{ agent: { conversationId: number } }>(
      await call("PUT", s.path("/rig/agents/polecat-alpha"), {
        token: s.mayor,
        body: { role: "polecat", conversation: "new" },
      }),
    );
    const conversationId = registered.agent.conversationId;
    expect(conversationId).not.toBe(s.conversationId);
    const set = await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
      token: s.mayor,
      body: { bead_id: "gt-2", title: "again" },
    });
    expect(set.headers.get("hook-attempt")).toBe("2");
    expect(await json(set)).toMatchObject({ status: "active", work_item: { bead_id: "gt-2" } });
    // Its work item is placed on the new conversation (not answered as a duplicate of the old input) and its answer
    // completes the hook.
    await until(
      async () => ((await s.hook()).status === "completed" ? true : undefined),
      "the replacement's work completed",
      1000,
    );
    const page = await json<{ items: { kind: string; model?: { content: unknown }[] }[] }>(
      await call("GET", s.path(`/conversations/${conversationId}/entries?limit=100`), { token: s.user }),
    );
    expect(page.items.filter((e) => e.kind === "user").map((e) => JSON.stringify(e.model))).toEqual([
      expect.stringContaining("Work item gt-2: again"),
    ]);
    expect(await s.workInputs()).toBe(1);
  }, 30_000);
});

describe("GUPP and a reassigned hook", () => {
  it("Clearing an active conversation agent's hook aborts its work item: no orphan input runs, its answer completes nothing, the next work is placed", async () => {
    const s = await setup("reassigned");
    const set = await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
      token: s.mayor,
      body: { bead_id: "gt-1", title: LONG },
    });
    expect(await json(set)).toMatchObject({ status: "active" });
    // The work item's input, as the hook record keeps it.
    const accepted = await runInDurableObject(
      stubOf(TENANT, s.name) as unknown as DurableObjectStub<SessionObject>,
      async (instance: SessionObject) => {
        const stored = (await harnessOf(instance).storage.getValue(bind(hookValue("polecat-alpha"), {})))?.value;
        if (stored?.input === undefined) throw new Error("the active hook records no input");
        return { inputId: stored.input.inputId };
      },
    );
    // The mayor reassigns the work while the agent's conversation is still answering it.
    const cleared = await call("DELETE", s.path("/rig/agents/polecat-alpha/hook"), { token: s.mayor });
    expect(cleared.status).toBe(200);
    expect(await json(cleared)).toMatchObject({ status: "empty", work_item: null });
    const result = await until(
      async () => {
        const input = await json<{ result: { status: string; reason?: string } }>(
          await call("GET", s.path(`/inputs/${accepted.inputId}`), { token: s.user }),
        );
        return input.result.status === "queued" || input.result.status === "placed" ? undefined : input.result;
      },
      "the work item's input ended",
      1000,
    );
    expect(result).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(await s.hook()).toMatchObject({ status: "empty", work_item: null });
    // The agent is not terminated: its next work is placed on the idle conversation and completes its hook.
    const next = await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
      token: s.mayor,
      body: { bead_id: "gt-2", title: "short" },
    });
    expect(next.headers.get("hook-attempt")).toBe("2");
    await until(
      async () => ((await s.hook()).status === "completed" ? true : undefined),
      "the next work completed",
      1000,
    );
    expect(await s.hook()).toMatchObject({ status: "completed", work_item: { bead_id: "gt-2" } });
  }, 30_000);
});

describe("GUPP and the session fault", () => {
  it("GUPP runs after a fault is cleared", async () => {
    try {
      // A task that breaks its contract faults the session (its kind is known from the session's open).
      registerTestKinds([erase(contractKind(true))]);
      const s = await setup("fault");
      const operator = await token(TENANT, "operator");
      await runInDurableObject(
        stubOf(TENANT, s.name) as unknown as DurableObjectStub<SessionObject>,
        async (instance: SessionObject) => {
          const root = await harnessOf(instance).root(background);
          await root.commit(
            (tx) => tx.task(contractKind(true), { state: { status: "pending", note: "" } }),
            background,
          );
        },
      );
      await until(
        async () =>
          (await json(await call("GET", s.path("/inspect"), { token: operator })))["fault"] !== undefined
            ? true
            : undefined,
        "the fault",
      );
      // The operator deploys a fixed kind; the object restarts faulted (opened, not driven), then the fault is cleared.
      registerTestKinds([erase(contractKind(false))]);
      await abortAllDurableObjects();
      expect(await json(await call("POST", s.path("/fault/clear"), { token: operator }))).toEqual({ cleared: true });

      // The agent's conversation is busy, so the hook stays pending; the user's turn is aborted (no final
      // answer): only GUPP's host side activates the hook once the conversation is idle.
      expect(
        (
          await call("POST", s.path(`/conversations/${s.conversationId}/inputs`), {
            token: s.user,
            body: { input: LONG },
          })
        ).status,
      ).toBe(201);
      expect(
        await json(
          await call("PUT", s.path("/rig/agents/polecat-alpha/hook"), {
            token: s.mayor,
            body: { bead_id: "gt-1", title: "short" },
          }),
        ),
      ).toMatchObject({ status: "pending" });
      expect((await call("POST", s.path(`/conversations/${s.conversationId}/abort`), { token: s.user })).status).toBe(
        200,
      );
      await until(
        async () => ((await s.hook()).status !== "pending" ? true : undefined),
        "activation after the fault was cleared",
        1000,
      );
      await until(async () => ((await s.hook()).status === "completed" ? true : undefined), "completion", 1000);
      expect(await s.workInputs()).toBe(1);
    } finally {
      resetTestKinds();
    }
  }, 60_000);
});
