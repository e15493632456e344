/**
 * The rig over HTTP around the witness (docs/rig.md): a patrol in the Durable Object (manual clock) nudges
 * a conversation agent's watchers live (SSE `nudge` message with a `seq.n` id, not a commit) and an
 * external agent's long poll; the health report has the document's fields; mail and acks; the witness
 * settings; terminate; and the `.chipset/state` filesystem contract with its tar round trip.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { untar } from "../../src/rig/chipset.js";
import { mailbox } from "../../src/rig/state.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, client, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";
import { harnessOf, installSeams, resetSeams, type ManualClock } from "./session-fixtures.js";

const TENANT = "rigflow";
const MIN = 60_000;

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

async function advance(name: string, ms: number): Promise<void> {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`${TENANT}:${name}`));
  await runInDurableObject(stub, async (instance: SessionObject) => {
    const clock = instance.clock as ManualClock;
    clock.advanceTo(clock.now() + ms);
  });
}

describe("the rig around the witness, over HTTP", () => {
  it("a patrol nudges a conversation agent's watchers and an external poller live; health, mail, settings, terminate", async () => {
    installSeams();
    const name = uniqueSession("flow");
    const mayor = await token(TENANT, "mayor");
    const operator = await token(TENANT, "operator");
    const alpha = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [name] });
    const bravo = await token(TENANT, "agent", { agent: "polecat-bravo", sessions: [name] });
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: { model: "echo-slow" } })).status).toBe(
      201,
    );

    // Settings: each at least 1,000 ms; the mayor or an operator patches them.
    expect((await call("PATCH", path("/witness"), { token: operator, body: { patrolIntervalMs: 999 } })).status).toBe(
      400,
    );
    expect((await call("PATCH", path("/witness"), { token: alpha, body: { patrolIntervalMs: 60_000 } })).status).toBe(
      403,
    );
    const settings = await json(
      await call("PATCH", path("/witness"), { token: mayor, body: { spawnGraceMs: 120_000 } }),
    );
    expect(settings).toEqual({
      patrolIntervalMs: 5 * MIN,
      stallThresholdMs: 30 * MIN,
      alertAfterMs: 60 * MIN,
      spawnGraceMs: 120_000,
      touchThrottleMs: 30_000,
    });

    const registered = await json<{ agent: { conversationId: number } }>(
      await call("PUT", path("/agents/polecat-alpha"), {
        token: mayor,
        body: { role: "polecat", conversation: "new" },
      }),
    );
    const conversationId = registered.agent.conversationId;
    expect(conversationId).toBeGreaterThan(1);
    expect((await call("PUT", path("/agents/polecat-bravo"), { token: mayor, body: { role: "polecat" } })).status).toBe(
      201,
    );
    // GUPP activates the conversation agent in the setting commit; its answer is aborted, which leaves
    // the hook active (for the witness and the mayor). The external agent activates its own.
    const setAlpha = await call("PUT", path("/agents/polecat-alpha/hook"), {
      token: mayor,
      body: { bead_id: "gt-polecat-alpha", title: "work" },
    });
    expect(await json(setAlpha)).toMatchObject({ status: "active" });
    expect((await call("POST", path("/hook/activate"), { token: alpha, body: { attempt: 1 } })).status).toBe(409);
    expect(
      (await call("POST", `/v1/sessions/${name}/conversations/${conversationId}/abort`, { token: mayor })).status,
    ).toBe(200);
    await until(async () => {
      const snapshot = await json<{ tasks: unknown[] }>(
        await call("GET", `/v1/sessions/${name}/conversations/${conversationId}`, { token: mayor }),
      );
      return snapshot.tasks.length === 0 ? true : undefined;
    }, "the aborted answer");
    expect(await json(await call("GET", path("/agents/polecat-alpha/hook"), { token: mayor }))).toMatchObject({
      status: "active",
    });
    expect(
      (
        await call("PUT", path("/agents/polecat-bravo/hook"), {
          token: mayor,
          body: { bead_id: "gt-polecat-bravo", title: "work" },
        })
      ).status,
    ).toBe(200);
    expect((await call("POST", path("/hook/activate"), { token: bravo, body: { attempt: 1 } })).status).toBe(200);

    // A watcher of alpha's conversation, and bravo listening for nudges.
    const api = await client(TENANT);
    const controller = new AbortController();
    const frames = api.session(name).conversation(conversationId).frames({ signal: controller.signal });
    const first = await frames.next();
    expect(first.value?.event).toBe("view");
    const viewId = first.value?.id ?? "";
    const bravoPoll = call("GET", path("/nudges?wait=20"), { token: bravo });
    await new Promise((resolve) => setTimeout(resolve, 50));

    await advance(name, 31 * MIN);
    const frame = await frames.next();
    expect(frame.value?.event).toBe("nudge");
    expect(frame.value?.id).toBe(`${viewId}.1`);
    expect(JSON.parse(frame.value?.data ?? "{}")).toMatchObject({
      from: "witness",
      to: "polecat-alpha",
      channel: "nudge",
      payload: "HEALTH_CHECK: no activity for 31m on gt-polecat-alpha",
      durable: false,
    });
    controller.abort();
    const polled = await json<{ nudges: { payload: string }[] }>(await bravoPoll);
    expect(polled.nudges.map((n) => n.payload)).toEqual(["HEALTH_CHECK: no activity for 31m on gt-polecat-bravo"]);

    // Health: the document's RigHealthReport fields, names and types; extras beside them.
    const health = await json(await call("GET", path("/health"), { token: mayor }));
    expect(health).toMatchObject({
      rigName: name,
      totalAgents: 2,
      activeAgents: 0,
      stalledAgents: 2,
      idleAgents: 0,
      terminatedAgents: 0,
    });
    expect(typeof health["timestamp"]).toBe("string");
    expect(health["stalledDetails"]).toEqual([
      { agentId: "polecat-alpha", beadId: "gt-polecat-alpha", stalledMinutes: 31, nudgesSent: 1 },
      { agentId: "polecat-bravo", beadId: "gt-polecat-bravo", stalledMinutes: 31, nudgesSent: 1 },
    ]);
    expect((await call("GET", path("/health"), { token: alpha })).status).toBe(403);

    // Mail: the witness's health summary reached the mayor; an agent mails the mayor; acks are separate.
    const mayorMail = await json<{ messages: { id: number; from: string; payload: unknown; ack?: unknown }[] }>(
      await call("GET", path("/mail"), { token: mayor }),
    );
    expect(mayorMail.messages.map((m) => [m.from, m.payload])).toEqual([
      ["witness", "HEALTH: 2 agents, 0 active, 2 stalled (polecat-alpha, polecat-bravo), 0 idle, 0 terminated"],
    ]);
    const sent = await call("POST", path("/mail"), { token: bravo, body: { to: "mayor", payload: "stuck on tests" } });
    expect(sent.status).toBe(201);
    const message = await json<{ id: number }>(sent);
    expect((await call("POST", path(`/mail/${message.id}/ack`), { token: bravo })).status).toBe(404);
    const acked = await json<{ ack: { by: string } }>(
      await call("POST", path(`/mail/${message.id}/ack`), { token: mayor }),
    );
    expect(acked.ack.by).toBe("mayor");
    expect((await json<{ messages: unknown[] }>(await call("GET", path("/mail"), { token: bravo }))).messages).toEqual(
      [],
    );
    expect(
      (await call("POST", path("/mail"), { token: bravo, body: { to: "polecat-nobody", payload: "x" } })).status,
    ).toBe(404);

    // Terminate: mayor only, recorded with who did it, nothing cleared.
    expect((await call("POST", path("/agents/polecat-alpha/terminate"), { token: operator })).status).toBe(403);
    const terminated = await json<{ terminated: { by: string } }>(
      await call("POST", path("/agents/polecat-alpha/terminate"), { token: mayor }),
    );
    expect(terminated.terminated.by).toBe("mayor");
    const hook = await json(await call("GET", path("/agents/polecat-alpha/hook"), { token: mayor }));
    expect(hook).toMatchObject({ status: "active" });
    expect((await call("POST", path("/hook/touch"), { token: alpha, body: { attempt: 1 } })).status).toBe(409);
    expect((await json(await call("GET", path("/health"), { token: mayor })))["terminatedAgents"]).toBe(1);
  });
});

describe("the .chipset/state filesystem contract", () => {
  it(".chipset/state round-trip: export, unpack, compare each hook file to the document's format", async () => {
    const name = uniqueSession("chipset");
    const mayor = await token(TENANT, "mayor");
    const alpha = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [name] });
    const bravo = await token(TENANT, "agent", { agent: "polecat-bravo", sessions: [name] });
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: {} })).status).toBe(201);
    for (const id of ["polecat-alpha", "polecat-bravo", "refinery-f5g6h"]) {
      expect(
        (
          await call("PUT", path(`/agents/${id}`), {
            token: mayor,
            body: { role: id.startsWith("refinery") ? "refinery" : "polecat" },
          })
        ).status,
      ).toBe(201);
    }
    expect(
      (
        await call("PUT", path("/agents/polecat-alpha/hook"), {
          token: mayor,
          body: { bead_id: "gt-abc12", title: "Add README section" },
        })
      ).status,
    ).toBe(200);
    expect((await call("POST", path("/hook/activate"), { token: alpha, body: { attempt: 1 } })).status).toBe(200);
    expect((await call("POST", path("/mail"), { token: bravo, body: { to: "mayor", payload: "hello" } })).status).toBe(
      201,
    );

    // One file: the agent reads its own, not another's.
    expect((await call("GET", path("/chipset/state/hooks/polecat-alpha.json"), { token: bravo })).status).toBe(403);
    const own = await call("GET", path("/chipset/state/hooks/polecat-alpha.json"), { token: alpha });
    expect(own.status).toBe(200);
    const text = await own.text();

    const exported = await call("GET", path("/chipset/state"), { token: mayor });
    expect(exported.status).toBe(200);
    expect(exported.headers.get("content-type")).toBe("application/x-tar");
    const files = untar(new Uint8Array(await exported.arrayBuffer()));
    expect([...files.keys()].filter((p) => p.includes("/hooks/")).sort()).toEqual([
      ".chipset/state/hooks/polecat-alpha.json",
      ".chipset/state/hooks/polecat-bravo.json",
      ".chipset/state/hooks/refinery-f5g6h.json",
    ]);
    expect(files.get(".chipset/state/hooks/polecat-alpha.json")).toBe(text);
    for (const [file, content] of files) {
      if (!file.includes("/hooks/")) continue;
      const hook = JSON.parse(content) as Record<string, unknown>;
      // The document's format: exactly its fields, keys sorted (serializeSorted), ISO 8601 UTC times.
      expect(Object.keys(hook)).toEqual(["agent_id", "last_activity", "status", "work_item"]);
      expect(content).toBe(`${JSON.stringify(hook, null, 2)}\n`);
      expect(hook["agent_id"]).toBe(file.slice(".chipset/state/hooks/".length, -".json".length));
      expect(hook["last_activity"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      if (hook["status"] === "empty") expect(hook["work_item"]).toBeNull();
      else expect(Object.keys(hook["work_item"] as object)).toEqual(["assigned_at", "bead_id", "title"]);
    }
    const mail = [...files.keys()].filter((p) => p.startsWith(".chipset/state/mail/mayor/"));
    expect(mail).toHaveLength(1);
    expect(mail[0]).toMatch(/^\.chipset\/state\/mail\/mayor\/\d{4}-\d\d-\d\dT[\d:.]+Z-polecat-bravo\.json$/);
    expect(JSON.parse(files.get(mail[0] ?? "") ?? "{}")).toMatchObject({
      from: "polecat-bravo",
      to: "mayor",
      channel: "mail",
      payload: "hello",
      durable: true,
    });
    expect((await call("GET", path("/chipset/state"), { token: alpha })).status).toBe(403);
  });
});

describe("reserved names", () => {
  it("An agent cannot read or write as the mayor", async () => {
    installSeams();
    const name = uniqueSession("reserved");
    const mayor = await token(TENANT, "mayor");
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: {} })).status).toBe(201);
    expect((await call("PUT", path("/agents/polecat-alpha"), { token: mayor, body: { role: "polecat" } })).status).toBe(
      201,
    );
    const alpha = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [name] });
    expect(
      (await call("POST", path("/mail"), { token: alpha, body: { to: "mayor", payload: "for the mayor only" } }))
        .status,
    ).toBe(201);

    // The reserved names are no agent ids: registering one is refused and writes nothing.
    const before = await lastSeq(TENANT, name);
    for (const reserved of ["mayor", "witness", "operator"]) {
      const refused = await call("PUT", path(`/agents/${reserved}`), { token: mayor, body: { role: "polecat" } });
      expect(refused.status, reserved).toBe(400);
      const problem = await json(refused);
      expect(problem["field"], reserved).toBe("agentId");
      expect(String(problem["detail"]), reserved).toContain("reserved");
    }
    expect(await lastSeq(TENANT, name)).toBe(before);

    // An agent token named after a reserved name is refused (401): it neither reads the mayor's mail nor
    // instructs the witness.
    for (const reserved of ["mayor", "witness", "operator"]) {
      const impostor = await token(TENANT, "agent", { agent: reserved, sessions: [name] });
      const read = await call("GET", path("/mail"), { token: impostor });
      expect(read.status, reserved).toBe(401);
      expect((await json(read))["field"]).toBe("token.agent");
      const write = await call("POST", path("/mail"), {
        token: impostor,
        body: { to: "witness", payload: { set: { stallThresholdMs: 60_000 } } },
      });
      expect(write.status, reserved).toBe(401);
      await write.body?.cancel();
    }
    expect(await lastSeq(TENANT, name)).toBe(before);
    // Mail to "operator" names no mailbox.
    expect((await call("POST", path("/mail"), { token: alpha, body: { to: "operator", payload: "x" } })).status).toBe(
      400,
    );
    const mail = await json<{ messages: { payload: unknown }[] }>(await call("GET", path("/mail"), { token: mayor }));
    expect(mail.messages.map((m) => m.payload)).toEqual(["for the mayor only"]);
  });
});

describe("mail by cursor and its export", () => {
  it("Mail past 1,000 is readable and exported", async () => {
    const name = uniqueSession("mail-1005");
    const mayor = await token(TENANT, "mayor");
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: {} })).status).toBe(201);
    expect((await call("PUT", path("/agents/polecat-alpha"), { token: mayor, body: { role: "polecat" } })).status).toBe(
      201,
    );
    // 1,005 messages to the mayor, written in one commit (as 1,005 sends would leave them).
    const base = Date.parse("2026-03-05T10:00:00Z");
    await runInDurableObject(
      env.SESSIONS.get(env.SESSIONS.idFromName(`${TENANT}:${name}`)),
      async (instance: SessionObject) => {
        await harnessOf(instance).commit(async (tx) => {
          for (let i = 0; i < 1005; i++) {
            tx.list(mailbox("mayor")).append({
              from: "polecat-alpha",
              sender: "agent",
              to: "mayor",
              channel: "mail",
              payload: `message ${i}`,
              timestamp: new Date(base + i * 1000).toISOString(),
              durable: true,
            });
          }
        }, BACKGROUND_CONTEXT);
      },
    );

    // Paged by cursor: ?after=&limit= (limit 1-1,000, default 1,000); `next` while more remain.
    const first = await json<{ messages: { id: number; payload: string }[]; next?: number }>(
      await call("GET", path("/mail"), { token: mayor }),
    );
    expect(first.messages).toHaveLength(1000);
    expect(first.next).toBe(first.messages[999]?.id);
    const rest = await json<{ messages: { id: number; payload: string }[]; next?: number }>(
      await call("GET", path(`/mail?after=${first.next}`), { token: mayor }),
    );
    expect(rest.messages.map((m) => m.payload)).toEqual([
      "message 1000",
      "message 1001",
      "message 1002",
      "message 1003",
      "message 1004",
    ]);
    expect(rest.next).toBeUndefined();
    const small = await json<{ messages: { payload: string }[]; next?: number }>(
      await call("GET", path("/mail?limit=2"), { token: mayor }),
    );
    expect(small.messages.map((m) => m.payload)).toEqual(["message 0", "message 1"]);
    const after = await json<{ messages: { payload: string }[] }>(
      await call("GET", path(`/mail?after=${small.next}&limit=1`), { token: mayor }),
    );
    expect(after.messages.map((m) => m.payload)).toEqual(["message 2"]);
    for (const bad of ["limit=0", "limit=1001", "after=x", "before=1"]) {
      const refused = await call("GET", path(`/mail?${bad}`), { token: mayor });
      expect(refused.status, bad).toBe(400);
      expect((await json(refused))["code"], bad).toBe("invalid_query");
    }

    // The export holds every message.
    const files = untar(
      new Uint8Array(await (await call("GET", path("/chipset/state"), { token: mayor })).arrayBuffer()),
    );
    const mail = [...files.keys()].filter((p) => p.startsWith(".chipset/state/mail/mayor/"));
    expect(mail).toHaveLength(1005);
    expect(files.get(".chipset/state/mail/mayor/2026-03-05T10:16:44.000Z-polecat-alpha.json")).toContain(
      '"payload": "message 1004"',
    );
  });

  it("Every mailbox is exported", async () => {
    const name = uniqueSession("mailboxes");
    const mayor = await token(TENANT, "mayor");
    const alpha = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [name] });
    const bravo = await token(TENANT, "agent", { agent: "polecat-bravo", sessions: [name] });
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: {} })).status).toBe(201);
    for (const id of ["polecat-alpha", "polecat-bravo", "polecat-quiet"])
      expect((await call("PUT", path(`/agents/${id}`), { token: mayor, body: { role: "polecat" } })).status).toBe(201);
    expect(
      (await call("POST", path("/mail"), { token: mayor, body: { to: "polecat-alpha", payload: "take gt-1" } })).status,
    ).toBe(201);
    expect((await call("POST", path("/mail"), { token: alpha, body: { to: "mayor", payload: "on it" } })).status).toBe(
      201,
    );
    expect(
      (await call("POST", path("/mail"), { token: bravo, body: { to: "witness", payload: "still working" } })).status,
    ).toBe(201);
    expect(
      (
        await call("POST", path("/mail"), {
          token: alpha,
          body: { to: "polecat-bravo", payload: { bead: "gt-1", note: "see my branch" } },
        })
      ).status,
    ).toBe(201);

    const files = untar(
      new Uint8Array(await (await call("GET", path("/chipset/state"), { token: mayor })).arrayBuffer()),
    );
    const mail = [...files.keys()].filter((p) => p.startsWith(".chipset/state/mail/"));
    const owners = (p: string): string => p.split("/")[3] ?? "";
    expect(mail.map(owners).sort()).toEqual(["mayor", "polecat-alpha", "polecat-bravo", "witness"]);
    for (const file of mail) {
      const message = JSON.parse(files.get(file) ?? "{}") as Record<string, unknown>;
      // The document's AgentMessage, exactly: no id, ack or sender role in the file.
      expect(Object.keys(message)).toEqual(["channel", "durable", "from", "payload", "timestamp", "to"]);
      expect(message["to"]).toBe(owners(file));
      expect(file).toMatch(
        new RegExp(
          `^\\.chipset/state/mail/${owners(file)}/\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z-${String(message["from"])}\\.json$`,
        ),
      );
    }
    expect(JSON.parse(files.get(mail.find((p) => owners(p) === "polecat-bravo") ?? "") ?? "{}")).toMatchObject({
      from: "polecat-alpha",
      payload: { bead: "gt-1", note: "see my branch" },
    });
  });
});
