/**
 * Events out over HTTP (docs/integrations.md "Events out"): an operator registers an endpoint for the
 * tenant, a session's answer produces one signed `input.completed`, verified here with the
 * `standardwebhooks` library exactly as a receiver would. The endpoints' routes refuse bad bodies with a
 * typed problem naming the field and write nothing; a tenant without endpoints writes no event rows.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bind } from "../../src/core/state.js";
import { outboxList } from "../../src/worker/outbox/types.js";
import { Problem } from "../../src/worker/problems.js";
import { checkEndpointUrl } from "../../src/worker/http/routes/webhook-endpoints.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { harnessOf } from "./session-fixtures.js";
import { call, json, lastSeq, stubOf, token, uniqueSession } from "./http-fixtures.js";
import { receiverPerTest, registerEndpoint, verifyAt } from "./event-fixtures.js";

const receiver = receiverPerTest();

async function outboxRows(tenant: string, session: string): Promise<number> {
  return runInDurableObject(
    stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>,
    async (instance: SessionObject) => {
      const h = harnessOf(instance);
      return (await h.storage.readList(bind(outboxList, {}), { limit: 1000 })).items.length;
    },
  );
}

describe("events out", () => {
  it("An answer produces one input.completed event signed for the endpoint", async () => {
    const tenant = "events-one";
    const session = uniqueSession("answer");
    const client = await token(tenant, "client");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const endpoint = await registerEndpoint(tenant, {
      url: "https://receiver.test/hooks",
      events: ["input.completed"],
    });
    expect(endpoint.secret).toMatch(/^whsec_/);

    const res = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
      token: client,
      body: { input: "hello events" },
    });
    expect(res.status).toBe(201);
    const accepted = await json<{
      inputId: number;
      conversationId: number;
      result: { status: string; answer?: number };
      answer?: { id: number; model: { content: { type: string; text: string }[] }[] };
    }>(res);
    expect(accepted.result.status).toBe("done");
    const answerText = (accepted.answer?.model ?? [])
      .flatMap((message) => message.content.filter((part) => part.type === "text").map((part) => part.text))
      .join("");
    expect(answerText).not.toBe("");
    const stub = stubOf(tenant, session);
    await runInDurableObject(stub as unknown as DurableObjectStub<SessionObject>, async () => undefined);
    for (let i = 0; i < 200 && receiver().received.length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));

    expect(receiver().received).toHaveLength(1);
    const request = receiver().received[0]!;
    expect(request.url).toBe("https://receiver.test/hooks");
    expect(verifyAt(undefined, endpoint.secret, request)).toEqual(request.event);
    expect(request.headers["webhook-id"]).toBe(request.event.id);
    expect(request.event.id).toMatch(/^evt_/);
    expect(request.event.type).toBe("input.completed");
    expect(request.event.data).toMatchObject({
      session,
      conversationId: accepted.conversationId,
      inputId: accepted.inputId,
      status: "done",
      answerEntryId: accepted.result.answer,
      text: answerText,
    });
    // The event belongs to the answer's commit: the last commit of the session.
    expect(request.event.data["seq"]).toBe(await lastSeq(tenant, session));
    expect(() => verifyAt(undefined, "whsec_" + btoa("another secret of thirty-two bytes!!"), request)).toThrow();

    // The alarm sends nothing more: the delivery is done.
    await runDurableObjectAlarm(stub as unknown as DurableObjectStub<SessionObject>);
    expect(receiver().received).toHaveLength(1);
    const deliveries = await json<{
      items: { eventId: string; status: string; attempts: number; lastStatusCode: number }[];
    }>(await call("GET", `/v1/sessions/${session}/deliveries`, { token: await token(tenant, "operator") }));
    expect(deliveries.items).toMatchObject([
      { eventId: request.event.id, status: "done", attempts: 1, lastStatusCode: 200 },
    ]);
  });

  it("A tenant without endpoints writes no outbox rows", async () => {
    const run = async (tenant: string): Promise<{ seq: number; rows: number }> => {
      const session = uniqueSession("quiet");
      const client = await token(tenant, "client");
      expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
      expect(
        (
          await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
            token: client,
            body: { input: "quiet" },
          })
        ).status,
      ).toBe(201);
      return { seq: await lastSeq(tenant, session), rows: await outboxRows(tenant, session) };
    };
    await registerEndpoint("events-other", {
      url: "https://receiver.test/other",
      events: ["input.completed"],
      sessions: ["nobody-*"],
    });
    const none = await run("events-none");
    const other = await run("events-other");
    expect(none).toEqual({ seq: none.seq, rows: 0 });
    expect(other).toEqual(none);
    expect(receiver().received).toHaveLength(0);
  });

  it("endpoint routes refuse bad bodies naming the field, write nothing, and are for operators only", async () => {
    const tenant = "events-refused";
    const op = await token(tenant, "operator");
    const bad: [unknown, string][] = [
      [{ url: "not a url", events: ["input.completed"] }, "url"],
      [{ url: "https://x.test/h", events: [] }, "events"],
      [{ url: "https://x.test/h", events: ["input.started"] }, "events.0"],
      [{ url: "https://x.test/h", events: ["input.completed"], sessions: ["a b"] }, "sessions.0"],
      [{ url: "https://x.test/h", events: ["input.completed"], extra: 1 }, "extra"],
    ];
    for (const [body, field] of bad) {
      const response = await call("POST", "/v1/webhook-endpoints", { token: op, body });
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(await json(response)).toMatchObject({ code: "invalid_endpoint", field });
    }
    expect(await json(await call("GET", "/v1/webhook-endpoints", { token: op }))).toEqual({ items: [] });
    expect((await call("GET", "/v1/webhook-endpoints", { token: await token(tenant, "client") })).status).toBe(403);
    expect((await call("GET", "/v1/webhook-endpoints/we_aaaaaaaaaaaaaaaa", { token: op })).status).toBe(404);
    const created = await registerEndpoint(tenant, { url: "https://x.test/h", events: ["input.completed"] });
    const listed = await json<{ items: Record<string, unknown>[] }>(
      await call("GET", "/v1/webhook-endpoints", { token: op }),
    );
    expect(listed.items).toHaveLength(1);
    expect(listed.items[0]).not.toHaveProperty("secret");
    const patched = await json(
      await call("PATCH", `/v1/webhook-endpoints/${created.id}`, { token: op, body: { enabled: false } }),
    );
    expect(patched).toMatchObject({ enabled: false, disabledReason: "disabled by an operator" });
    const rotated = await json<{ secret: string; previousSecretExpiresAt: string }>(
      await call("POST", `/v1/webhook-endpoints/${created.id}/rotate-secret`, { token: op }),
    );
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(await json(await call("DELETE", `/v1/webhook-endpoints/${created.id}`, { token: op }))).toEqual({
      id: created.id,
      deleted: true,
    });
    expect((await call("GET", `/v1/webhook-endpoints/${created.id}`, { token: op })).status).toBe(404);
  });

  it("an endpoint url is https:, plain http: only in development", () => {
    expect(() => checkEndpointUrl("https://example.com/hooks", "production")).not.toThrow();
    expect(() => checkEndpointUrl("http://localhost:9000/", "development")).not.toThrow();
    for (const environment of ["production", "staging"]) {
      let thrown: unknown;
      try {
        checkEndpointUrl("http://example.com/hooks", environment);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(Problem);
      expect((thrown as Problem).code).toBe("invalid_endpoint");
      expect((thrown as Problem).field).toBe("url");
    }
  });
});
