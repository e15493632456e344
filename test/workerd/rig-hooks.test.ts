/**
 * The rig's hooks over HTTP (seed 000 "Hook persistence"): the lifecycle with the four roles,
 * the table of every (status, transition, role) with its status code and no write on refusal, racing
 * dispatchers, stale completions (attempt and If-Match), and the agent's long poll.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import type { Role } from "../../src/worker/schemas.js";
import { call, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TENANT = "rig";

interface Rig {
  readonly name: string;
  readonly path: (rest: string) => string;
  readonly tokens: Readonly<Record<"client" | "operator" | "mayor", string>>;
  agent(id: string): Promise<string>;
}

async function rig(label: string): Promise<Rig> {
  const name = uniqueSession(label);
  const tokens = {
    client: await token(TENANT, "client"),
    operator: await token(TENANT, "operator"),
    mayor: await token(TENANT, "mayor"),
  };
  const created = await call("PUT", `/v1/sessions/${name}`, { token: tokens.client, body: {} });
  expect(created.status).toBe(201);
  return {
    name,
    path: (rest) => `/v1/sessions/${name}/rig${rest}`,
    tokens,
    agent: (id) => token(TENANT, "agent", { agent: id, sessions: [name] }),
  };
}

async function register(r: Rig, id: string, role = "polecat"): Promise<void> {
  const response = await call("PUT", r.path(`/agents/${id}`), { token: r.tokens.mayor, body: { role } });
  expect(response.status, `register ${id}`).toBe(201);
}

const HOOK_FIELDS = ["agent_id", "last_activity", "status", "work_item"];

describe("Hook lifecycle", () => {
  it("full cycle over HTTP with the four roles: the mayor sets, the agent activates, touches and completes, the mayor clears", async () => {
    const r = await rig("lifecycle");
    const agent = await r.agent("polecat-alpha");
    const other = await r.agent("polecat-bravo");

    // client: no rig routes at all.
    expect(
      (await call("PUT", r.path("/agents/polecat-alpha"), { token: r.tokens.client, body: { role: "polecat" } }))
        .status,
    ).toBe(403);
    // operator registers; the mayor's identical registration is a 200 that writes nothing.
    expect(
      (await call("PUT", r.path("/agents/polecat-alpha"), { token: r.tokens.operator, body: { role: "polecat" } }))
        .status,
    ).toBe(201);
    await register(r, "polecat-bravo");
    const before = await lastSeq(TENANT, r.name);
    expect(
      (await call("PUT", r.path("/agents/polecat-alpha"), { token: r.tokens.mayor, body: { role: "polecat" } })).status,
    ).toBe(200);
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    // An agent may not register agents; a bad id is refused.
    expect(
      (await call("PUT", r.path("/agents/polecat-charlie"), { token: agent, body: { role: "polecat" } })).status,
    ).toBe(403);
    expect(
      (await call("PUT", r.path("/agents/Bad_Id"), { token: r.tokens.mayor, body: { role: "polecat" } })).status,
    ).toBe(400);

    // A registered agent starts with an empty hook, exactly the document's fields.
    const empty = await call("GET", r.path("/hook"), { token: agent });
    expect(empty.status).toBe(200);
    const emptyHook = await json(empty);
    expect(Object.keys(emptyHook).sort()).toEqual(HOOK_FIELDS);
    expect(emptyHook).toMatchObject({ agent_id: "polecat-alpha", status: "empty", work_item: null });
    expect(empty.headers.get("hook-attempt")).toBe("0");

    // The mayor sets: pending, attempt 1, a new ETag.
    const set = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-abc12", title: "Add README section" },
    });
    expect(set.status).toBe(200);
    const pending = await json(set);
    expect(pending).toMatchObject({
      agent_id: "polecat-alpha",
      status: "pending",
      work_item: { bead_id: "gt-abc12", title: "Add README section" },
    });
    expect(Object.keys(pending["work_item"] as object).sort()).toEqual(["assigned_at", "bead_id", "title"]);
    expect(pending["last_activity"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(set.headers.get("hook-attempt")).toBe("1");
    const setTag = set.headers.get("etag");
    expect(setTag).toMatch(/^"\d+"$/);
    expect(setTag).not.toBe(empty.headers.get("etag"));

    // Nobody else activates it: the mayor, an operator, the client (another agent's /rig/hook is its own).
    for (const jwt of [r.tokens.mayor, r.tokens.operator, r.tokens.client]) {
      const refused = await call("POST", r.path("/hook/activate"), { token: jwt, body: { attempt: 1 } });
      expect(refused.status).toBe(403);
    }
    // Another agent cannot read this hook; the mayor and operator can.
    expect((await call("GET", r.path("/agents/polecat-alpha/hook"), { token: other })).status).toBe(403);
    expect((await call("GET", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.operator })).status).toBe(200);

    const activated = await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 1 } });
    expect(activated.status).toBe(200);
    expect(await json(activated)).toMatchObject({ status: "active" });
    const activeTag = activated.headers.get("etag");

    // A touch inside the throttle window answers 200 with the current ETag and writes nothing.
    const seq = await lastSeq(TENANT, r.name);
    const touched = await call("POST", r.path("/hook/touch"), { token: agent, body: { attempt: 1 } });
    expect(touched.status).toBe(200);
    expect(touched.headers.get("etag")).toBe(activeTag);
    expect(await lastSeq(TENANT, r.name)).toBe(seq);

    const completed = await call("POST", r.path("/hook/complete"), {
      token: agent,
      body: { attempt: 1, summary: "done" },
      headers: { "if-match": activeTag ?? "" },
    });
    expect(completed.status).toBe(200);
    expect(await json(completed)).toMatchObject({ status: "completed", work_item: { bead_id: "gt-abc12" } });

    // Only the mayor clears; the hook is an empty record again, not deleted.
    expect((await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.operator })).status).toBe(403);
    expect((await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: agent })).status).toBe(403);
    const cleared = await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor });
    expect(cleared.status).toBe(200);
    expect(await json(cleared)).toMatchObject({ status: "empty", work_item: null });

    // The list shows both agents with hook and health; deregistering needs an empty hook.
    const list = await json<{ agents: { agent_id: string; health: string; hook: { status: string } }[] }>(
      await call("GET", r.path("/agents"), { token: r.tokens.mayor }),
    );
    expect(list.agents.map((a) => [a.agent_id, a.hook.status, a.health])).toEqual([
      ["polecat-alpha", "empty", "idle"],
      ["polecat-bravo", "empty", "idle"],
    ]);
    expect((await call("DELETE", r.path("/agents/polecat-alpha"), { token: r.tokens.operator })).status).toBe(403);
    expect((await call("DELETE", r.path("/agents/polecat-alpha"), { token: r.tokens.mayor })).status).toBe(200);
    expect((await call("GET", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor })).status).toBe(404);
  });

  it("the table of every (status, transition, role): its status code, and a refusal writes nothing", async () => {
    const r = await rig("table");
    const statuses = ["empty", "pending", "active", "completed"] as const;
    const transitions = ["set", "activate", "touch", "complete", "clear"] as const;
    // The four roles; another agent's hook is the lifecycle test's (an agent's own-hook routes name no other).
    const roles = ["client", "operator", "mayor", "agent"] as const;
    const FROM = {
      set: "empty",
      activate: "pending",
      touch: "active",
      complete: "active",
      clear: "completed",
    } as const;
    const WHO = { set: "mayor", clear: "mayor", activate: "agent", touch: "agent", complete: "agent" } as const;
    let n = 0;
    for (const status of statuses) {
      for (const transition of transitions) {
        for (const role of roles) {
          n += 1;
          const id = `t-${n}`;
          await register(r, id);
          const own = await r.agent(id);
          // Bring the hook to `status` through the lifecycle.
          const steps: (() => Promise<Response>)[] = [
            () =>
              call("PUT", r.path(`/agents/${id}/hook`), {
                token: r.tokens.mayor,
                body: { bead_id: `bead-${n}`, title: "work" },
              }),
            () => call("POST", r.path("/hook/activate"), { token: own, body: { attempt: 1 } }),
            () => call("POST", r.path("/hook/complete"), { token: own, body: { attempt: 1 } }),
          ];
          for (const step of steps.slice(0, statuses.indexOf(status))) expect((await step()).status).toBe(200);

          const jwt = role === "agent" ? own : await token(TENANT, role as Role);
          const request = (() => {
            switch (transition) {
              case "set":
                return call("PUT", r.path(`/agents/${id}/hook`), {
                  token: jwt,
                  body: { bead_id: `other-${n}`, title: "more" },
                });
              case "clear":
                return call("DELETE", r.path(`/agents/${id}/hook`), { token: jwt });
              default:
                return call("POST", r.path(`/hook/${transition}`), { token: jwt, body: { attempt: 1 } });
            }
          })();
          const roleAllowed = role === WHO[transition];
          // The mayor clears any hook that is not empty (a pending or active one to reassign its work).
          const from = transition === "clear" ? status !== "empty" : status === FROM[transition];
          const expected = !roleAllowed ? 403 : from ? 200 : 409;
          const before = await lastSeq(TENANT, r.name);
          const response = await request;
          const label = `${status} ${transition} ${role}`;
          expect(response.status, label).toBe(expected);
          const body = await json(response);
          if (expected === 409) {
            expect(body["code"], label).toBe("hook_conflict");
            expect(String(body["detail"]), label).toContain(`the hook is ${status}`);
          }
          if (expected === 200 && transition === "clear") {
            expect(body, label).toMatchObject({ status: "empty", work_item: null });
          }
          if (expected !== 200) expect(await lastSeq(TENANT, r.name), label).toBe(before);
        }
      }
    }
  }, 120_000);
});

describe("Two dispatchers race for one bead", () => {
  it("50 concurrent sets of one bead onto different agents leave exactly one hook pending", async () => {
    const r = await rig("race-bead");
    const ids = Array.from({ length: 50 }, (_, i) => `polecat-${i}`);
    for (const id of ids) await register(r, id);
    const responses = await Promise.all(
      ids.map((id) =>
        call("PUT", r.path(`/agents/${id}/hook`), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-race", title: "one bead" },
        }),
      ),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    for (const response of responses.filter((x) => x.status === 409))
      expect((await json(response))["code"]).toBe("bead_already_hooked");
    const list = await json<{ agents: { hook: { status: string } }[] }>(
      await call("GET", r.path("/agents"), { token: r.tokens.mayor }),
    );
    expect(list.agents.filter((a) => a.hook.status === "pending")).toHaveLength(1);
  });

  it("50 concurrent sets onto one agent leave exactly one hook", async () => {
    const r = await rig("race-agent");
    await register(r, "polecat-alpha");
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        call("PUT", r.path("/agents/polecat-alpha/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: `gt-${i}`, title: "work" },
        }),
      ),
    );
    expect(responses.filter((x) => x.status === 200)).toHaveLength(1);
    for (const response of responses.filter((x) => x.status !== 200)) {
      expect(response.status).toBe(409);
      expect((await json(response))["code"]).toBe("hook_conflict");
    }
    const hook = await json(await call("GET", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor }));
    expect(hook).toMatchObject({ status: "pending" });
  });
});

describe("Stale completion", () => {
  it("a complete naming the first attempt is 409 stale_attempt, one with the first version's ETag is 412; the new hook stays active", async () => {
    const r = await rig("stale");
    await register(r, "polecat-alpha");
    const agent = await r.agent("polecat-alpha");
    const set = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-1", title: "first" },
    });
    const firstTag = set.headers.get("etag") ?? "";
    expect((await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 1 } })).status).toBe(200);
    expect((await call("POST", r.path("/hook/complete"), { token: agent, body: { attempt: 1 } })).status).toBe(200);
    expect((await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor })).status).toBe(200);
    const second = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-2", title: "second" },
    });
    expect(second.headers.get("hook-attempt")).toBe("2");
    expect((await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 2 } })).status).toBe(200);

    const before = await lastSeq(TENANT, r.name);
    const stale = await call("POST", r.path("/hook/complete"), { token: agent, body: { attempt: 1 } });
    expect(stale.status).toBe(409);
    expect((await json(stale))["code"]).toBe("stale_attempt");
    const conditional = await call("POST", r.path("/hook/complete"), {
      token: agent,
      body: { attempt: 2 },
      headers: { "if-match": firstTag },
    });
    expect(conditional.status).toBe(412);
    expect((await json(conditional))["code"]).toBe("precondition_failed");
    expect(await lastSeq(TENANT, r.name)).toBe(before);

    const hook = await call("GET", r.path("/hook"), { token: agent });
    expect(await json(hook)).toMatchObject({ status: "active", work_item: { bead_id: "gt-2" } });
    expect(hook.headers.get("hook-attempt")).toBe("2");
  });
});

describe("Stale completion after re-registration", () => {
  it("Stale completion after re-registration", async () => {
    const r = await rig("stale-rereg");
    await register(r, "polecat-alpha");
    const agent = await r.agent("polecat-alpha");
    expect(
      (
        await call("PUT", r.path("/agents/polecat-alpha/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-1", title: "first" },
        })
      ).status,
    ).toBe(200);
    expect((await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 1 } })).status).toBe(200);
    // The predecessor's mail, acknowledged.
    const sent = await json<{ id: number }>(
      await call("POST", r.path("/mail"), {
        token: r.tokens.mayor,
        body: { to: "polecat-alpha", payload: "for the first worker" },
      }),
    );
    expect((await call("POST", r.path(`/mail/${sent.id}/ack`), { token: agent })).status).toBe(200);

    // The mayor replaces the agent: terminate, clear, deregister, register again under the same id.
    expect((await call("POST", r.path("/agents/polecat-alpha/terminate"), { token: r.tokens.mayor })).status).toBe(200);
    expect((await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor })).status).toBe(200);
    expect((await call("DELETE", r.path("/agents/polecat-alpha"), { token: r.tokens.mayor })).status).toBe(200);
    await register(r, "polecat-alpha");
    const fresh = await call("GET", r.path("/hook"), { token: agent });
    expect(await json(fresh)).toMatchObject({ status: "empty", work_item: null });
    // Attempts are monotonic per agent id for the life of the rig; the mailbox starts empty, no acks.
    expect(fresh.headers.get("hook-attempt")).toBe("1");
    expect(
      (await json<{ messages: unknown[] }>(await call("GET", r.path("/mail"), { token: agent }))).messages,
    ).toEqual([]);
    expect((await call("POST", r.path(`/mail/${sent.id}/ack`), { token: agent })).status).toBe(404);

    const second = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-2", title: "second" },
    });
    expect(second.headers.get("hook-attempt")).toBe("2");
    expect((await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 2 } })).status).toBe(200);

    // The old worker's completion names its attempt: refused, nothing written.
    const before = await lastSeq(TENANT, r.name);
    const stale = await call("POST", r.path("/hook/complete"), {
      token: agent,
      body: { attempt: 1, summary: "old work" },
    });
    expect(stale.status).toBe(409);
    expect((await json(stale))["code"]).toBe("stale_attempt");
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    const hook = await call("GET", r.path("/hook"), { token: agent });
    expect(await json(hook)).toMatchObject({ status: "active", work_item: { bead_id: "gt-2" } });
    expect(hook.headers.get("hook-attempt")).toBe("2");
  });
});

describe("The mayor reassigns", () => {
  it("The mayor clears a pending or active hook to reassign its work, without terminating the agent; the old worker's transitions are refused", async () => {
    const r = await rig("reassign");
    await register(r, "polecat-alpha");
    await register(r, "polecat-bravo");
    const alpha = await r.agent("polecat-alpha");
    // A pending hook: cleared, the bead is free for another agent.
    expect(
      (
        await call("PUT", r.path("/agents/polecat-alpha/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-1", title: "first" },
        })
      ).status,
    ).toBe(200);
    const clearedPending = await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor });
    expect(clearedPending.status).toBe(200);
    expect(await json(clearedPending)).toMatchObject({ status: "empty", work_item: null });
    expect(
      (
        await call("PUT", r.path("/agents/polecat-bravo/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-1", title: "first" },
        })
      ).status,
    ).toBe(200);
    // An active hook: cleared while the agent works on it (the agent is not terminated).
    const second = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-2", title: "second" },
    });
    expect(second.headers.get("hook-attempt")).toBe("2");
    expect((await call("POST", r.path("/hook/activate"), { token: alpha, body: { attempt: 2 } })).status).toBe(200);
    expect((await call("DELETE", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor })).status).toBe(200);
    const agent = await json<{ terminated?: unknown }>(await call("GET", r.path("/agents"), { token: r.tokens.mayor }));
    expect(JSON.stringify(agent)).not.toContain("terminated");

    // The old worker's transitions on the cleared hook are refused and write nothing.
    let before = await lastSeq(TENANT, r.name);
    for (const name of ["touch", "complete"] as const) {
      const late = await call("POST", r.path(`/hook/${name}`), { token: alpha, body: { attempt: 2 } });
      expect(late.status, name).toBe(409);
      expect(await json(late), name).toMatchObject({
        code: "hook_conflict",
        detail: expect.stringContaining("the hook is empty"),
      });
    }
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    // New work on the same agent is a new attempt: the old worker's attempt is stale on every transition.
    const third = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-3", title: "third" },
    });
    expect(third.headers.get("hook-attempt")).toBe("3");
    before = await lastSeq(TENANT, r.name);
    const lateActivate = await call("POST", r.path("/hook/activate"), { token: alpha, body: { attempt: 2 } });
    expect(lateActivate.status).toBe(409);
    expect((await json(lateActivate))["code"]).toBe("stale_attempt");
    expect((await call("POST", r.path("/hook/activate"), { token: alpha, body: { attempt: 3 } })).status).toBe(200);
    before = await lastSeq(TENANT, r.name);
    for (const name of ["touch", "complete"] as const) {
      const late = await call("POST", r.path(`/hook/${name}`), { token: alpha, body: { attempt: 2 } });
      expect(late.status, name).toBe(409);
      expect((await json(late))["code"], name).toBe("stale_attempt");
    }
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    expect(await json(await call("GET", r.path("/hook"), { token: alpha }))).toMatchObject({
      status: "active",
      work_item: { bead_id: "gt-3" },
    });
    // An empty hook still has nothing to clear.
    expect((await call("DELETE", r.path("/agents/polecat-bravo/hook"), { token: r.tokens.mayor })).status).toBe(200);
    const empty = await call("DELETE", r.path("/agents/polecat-bravo/hook"), { token: r.tokens.mayor });
    expect(empty.status).toBe(409);
    expect((await json(empty))["code"]).toBe("hook_conflict");
  });
});

describe("attempt is required over HTTP", () => {
  it("activate, touch and complete without attempt are 400 naming attempt, and write nothing", async () => {
    const r = await rig("attempt-required");
    await register(r, "polecat-alpha");
    const agent = await r.agent("polecat-alpha");
    expect(
      (
        await call("PUT", r.path("/agents/polecat-alpha/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-1", title: "work" },
        })
      ).status,
    ).toBe(200);
    const before = await lastSeq(TENANT, r.name);
    for (const name of ["activate", "touch", "complete"] as const) {
      for (const body of [undefined, {}, { summary: "done" }]) {
        if (name !== "complete" && body !== undefined && "summary" in body) continue;
        const response = await call("POST", r.path(`/hook/${name}`), {
          token: agent,
          ...(body === undefined ? {} : { body }),
        });
        const label = `${name} ${JSON.stringify(body)}`;
        expect(response.status, label).toBe(400);
        expect(response.headers.get("content-type"), label).toContain("application/problem+json");
        expect((await json(response))["field"], label).toBe("attempt");
      }
    }
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    expect((await call("POST", r.path("/hook/activate"), { token: agent, body: { attempt: 1 } })).status).toBe(200);
  });
});

describe("Terminated agents", () => {
  it("A hook on a terminated agent is refused: 409 agent_terminated naming the agent's state, nothing written", async () => {
    const r = await rig("terminated");
    await register(r, "polecat-alpha");
    await register(r, "polecat-bravo");
    const bravo = await r.agent("polecat-bravo");
    expect(
      (
        await call("PUT", r.path("/agents/polecat-bravo/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-2", title: "work" },
        })
      ).status,
    ).toBe(200);
    expect((await call("POST", r.path("/hook/activate"), { token: bravo, body: { attempt: 1 } })).status).toBe(200);
    expect((await call("POST", r.path("/agents/polecat-alpha/terminate"), { token: r.tokens.mayor })).status).toBe(200);
    expect((await call("POST", r.path("/agents/polecat-bravo/terminate"), { token: r.tokens.mayor })).status).toBe(200);

    // The mayor cannot park a bead on a dead agent.
    const before = await lastSeq(TENANT, r.name);
    const refused = await call("PUT", r.path("/agents/polecat-alpha/hook"), {
      token: r.tokens.mayor,
      body: { bead_id: "gt-1", title: "work" },
    });
    expect(refused.status).toBe(409);
    const problem = await json(refused);
    expect(problem["code"]).toBe("agent_terminated");
    expect(String(problem["detail"])).toMatch(
      /^agent polecat-alpha is terminated \(by mayor at \d{4}-.+Z\); its hook is empty$/,
    );
    // The terminated agent's own transitions name its state the same way.
    const touch = await call("POST", r.path("/hook/touch"), { token: bravo, body: { attempt: 1 } });
    expect(touch.status).toBe(409);
    expect(await json(touch)).toMatchObject({
      code: "agent_terminated",
      detail: expect.stringContaining("agent polecat-bravo is terminated (by mayor at "),
    });
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    expect(
      await json(await call("GET", r.path("/agents/polecat-alpha/hook"), { token: r.tokens.mayor })),
    ).toMatchObject({ status: "empty", work_item: null });
    // The bead stays free for a live agent; the mayor may still clear the terminated agent's hook to reassign its work.
    expect((await call("DELETE", r.path("/agents/polecat-bravo/hook"), { token: r.tokens.mayor })).status).toBe(200);
    await register(r, "polecat-charlie");
    expect(
      (
        await call("PUT", r.path("/agents/polecat-charlie/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-2", title: "work" },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await call("PUT", r.path("/agents/polecat-bravo/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-3", title: "work" },
        })
      ).status,
    ).toBe(409);
  });
});

describe("Agent tokens name their sessions", () => {
  it("An agent token is refused on another rig", async () => {
    const first = await rig("rig-one");
    const second = await rig("rig-two");
    await register(first, "polecat-alpha");
    await register(second, "polecat-alpha");
    const own = await first.agent("polecat-alpha");
    expect((await call("GET", first.path("/hook"), { token: own })).status).toBe(200);

    // The same agent id on another rig of the tenant: 401, nothing written there.
    const before = await lastSeq(TENANT, second.name);
    for (const [method, rest, body] of [
      ["GET", "/hook", undefined],
      ["POST", "/mail", { to: "mayor", payload: "hello" }],
      ["GET", "/mail", undefined],
    ] as const) {
      const refused = await call(method, second.path(rest), { token: own, ...(body === undefined ? {} : { body }) });
      expect(refused.status, `${method} ${rest}`).toBe(401);
      expect(await json(refused), `${method} ${rest}`).toMatchObject({ code: "unauthorized", field: "token.sessions" });
    }
    expect(await lastSeq(TENANT, second.name)).toBe(before);

    // An agent token without the claim (or with an empty list) is refused everywhere.
    for (const claims of [{ agent: "polecat-alpha" }, { agent: "polecat-alpha", sessions: [] }]) {
      const refused = await call("GET", first.path("/hook"), { token: await token(TENANT, "agent", claims) });
      expect(refused.status).toBe(401);
      expect((await json(refused))["field"]).toBe("token.sessions");
    }
    // A token naming both sessions acts in both.
    const both = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [first.name, second.name] });
    expect((await call("GET", first.path("/hook"), { token: both })).status).toBe(200);
    expect((await call("GET", second.path("/hook"), { token: both })).status).toBe(200);
  });
});

describe("the agent's long poll", () => {
  it("GET .../rig/hook?wait returns as soon as the mayor sets the hook", async () => {
    const r = await rig("poll");
    await register(r, "polecat-alpha");
    const agent = await r.agent("polecat-alpha");
    const poll = call("GET", r.path("/hook?wait=10"), { token: agent });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(
      (
        await call("PUT", r.path("/agents/polecat-alpha/hook"), {
          token: r.tokens.mayor,
          body: { bead_id: "gt-9", title: "poll" },
        })
      ).status,
    ).toBe(200);
    const response = await poll;
    expect(response.status).toBe(200);
    expect(await json(response)).toMatchObject({ status: "pending", work_item: { bead_id: "gt-9" } });
    expect((await call("GET", r.path("/hook?wait=61"), { token: agent })).status).toBe(400);
  });
});
