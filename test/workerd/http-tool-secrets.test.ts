/**
 * An HTTP tool's signing secret from the API (docs/tools.md "The tool's secret"): the PUT that makes a tool an HTTP
 * tool answers it, a rotation answers the next generation's; new calls sign with the current generation, and a late
 * result verifies with it or, for 7 days after the rotation, with the one before. The backend never needs
 * WEBHOOK_MASTER_SECRET; the repo script derives the same secrets from it (`--generation`).
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { toolSecret } from "../../src/worker/crypto/webhooks.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, token, uniqueSession, until } from "./http-fixtures.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { clockOf, ManualClock, ManualTime, resetSeams } from "./session-fixtures.js";
import { httpDefinition } from "./tool-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

interface Sent {
  readonly text: string;
  readonly headers: Record<string, string>;
  readonly taskId: number;
}

/** A product endpoint that answers 202 to every call and keeps what it was sent. */
function product(): { readonly sent: Sent[]; readonly fetch: (request: Request) => Promise<Response> } {
  const sent: Sent[] = [];
  return {
    sent,
    fetch: async (request) => {
      const text = await request.text();
      const body = JSON.parse(text) as { taskId: number };
      sent.push({ text, headers: Object.fromEntries(request.headers), taskId: body.taskId });
      return new Response(null, { status: 202 });
    },
  };
}

function signedWith(secret: string, request: Sent): boolean {
  try {
    new Webhook(secret).verify(request.text, request.headers);
    return true;
  } catch {
    return false;
  }
}

/** A late result for `request`'s call, signed with `secret`. */
function postResult(tenant: string, session: string, request: Sent, secret: string, output: string): Promise<Response> {
  const body = JSON.stringify({ output });
  const id = request.headers["webhook-id"] ?? "";
  const now = new Date();
  return call("POST", `/v1/tool-results/${tenant}/${session}/${request.taskId}`, {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(secret).sign(id, now, body),
    },
  });
}

describe("tool secrets", () => {
  it("A tool's secret comes from the API and rotates", async () => {
    const tenant = uniqueSession("tool-secrets");
    const time = new ManualTime();
    const endpoint = product();
    // Sessions read the catalog on every use here (in production their copy is at most 30 s old).
    setHostSeams({ fetch: endpoint.fetch, clock: () => new ManualClock(time), catalogTtlMs: 0 });
    const operator = await token(tenant, "operator");

    // The PUT that makes it an HTTP tool answers its secret; later PUTs do not.
    const created = await call("PUT", "/v1/tools/report", {
      token: operator,
      body: httpDefinition("report", { timeoutMs: 600_000 }),
    });
    expect(created.status).toBe(201);
    const first = (await json<{ secret?: string }>(created)).secret ?? "";
    expect(first).toMatch(/^whsec_/);
    expect(first).toBe(await toolSecret(env.WEBHOOK_MASTER_SECRET, tenant, "report", 1));
    const replaced = await call("PUT", "/v1/tools/report", {
      token: operator,
      body: httpDefinition("report", { timeoutMs: 600_000 }),
    });
    expect(replaced.status).toBe(200);
    expect(await json(replaced)).not.toHaveProperty("secret");
    expect(JSON.stringify(await json(await call("GET", "/v1/tools/report", { token: operator })))).not.toContain(first);

    // A call is signed with it.
    const session = uniqueSession("tool-secrets-session");
    const client = await token(tenant, "client");
    const made = await call("PUT", `/v1/sessions/${session}`, {
      token: client,
      body: { model: "echo", selectedTools: ["report"], budgetMs: 1000 },
    });
    expect(made.status).toBe(201);
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`${tenant}:${session}`));
    /** One input that calls the tool; the turn goes on once the call's blocking budget passes (it waits for 202). */
    const send = async (id: number): Promise<Sent> => {
      const count = endpoint.sent.length;
      const accepted = await json<{ inputId: number }>(
        await call("POST", `/v1/sessions/${session}/conversations/root/inputs`, {
          token: client,
          body: { input: `/call report {"id":${id}}` },
        }),
      );
      const request = await until(async () => endpoint.sent[count], `call ${id} sent`);
      await runInDurableObject(stub, (instance: SessionObject) => clockOf(instance).advanceTo(time.now + 1001));
      await until(async () => {
        const view = await json<{ result: { status: string } }>(
          await call("GET", `/v1/sessions/${session}/inputs/${accepted.inputId}`, { token: client }),
        );
        return view.result.status === "done" ? true : undefined;
      }, `input ${id} done`);
      return request;
    };
    const early = await send(1);
    expect(signedWith(first, early)).toBe(true);

    // Rotated: the next generation's secret, answered once; the catalog moves, so new calls capture it.
    const rotated = await call("POST", "/v1/tools/report/rotate-secret", { token: operator });
    expect(rotated.status).toBe(200);
    const rotation = await json<{ secret: string; secretGeneration: number; previousSecretExpiresAt: string }>(rotated);
    expect(rotation.secretGeneration).toBe(2);
    expect(rotation.secret).not.toBe(first);
    expect(rotation.secret).toBe(await toolSecret(env.WEBHOOK_MASTER_SECRET, tenant, "report", 2));
    expect(Date.parse(rotation.previousSecretExpiresAt)).toBe(time.now + 7 * 86_400_000);
    const record = await json<{ definition: { handler: { secretGeneration?: number } } }>(
      await call("GET", "/v1/tools/report", { token: operator }),
    );
    expect(record.definition.handler.secretGeneration).toBe(2);

    // A call after the rotation is signed with the new secret only.
    const late = await send(2);
    expect(signedWith(rotation.secret, late)).toBe(true);
    expect(signedWith(first, late)).toBe(false);

    // The previous secret still verifies a late result (the first call's), the new one too (the second call's).
    expect((await postResult(tenant, session, early, first, "early result")).status).toBe(200);
    expect((await postResult(tenant, session, late, rotation.secret, "late result")).status).toBe(200);

    // Seven days on, the previous secret verifies nothing; the current one still does.
    const third = await send(3);
    time.now += 7 * 86_400_000;
    expect((await postResult(tenant, session, third, first, "too late")).status).toBe(401);
    expect((await postResult(tenant, session, third, rotation.secret, "in time")).status).toBe(200);

    // A client tool has no secret to rotate; an unknown tool is 404.
    await call("PUT", "/v1/tools/picker", {
      token: operator,
      body: { description: "Pick", parameters: { type: "object" }, handler: { type: "client" } },
    });
    expect((await call("POST", "/v1/tools/picker/rotate-secret", { token: operator })).status).toBe(409);
    expect((await call("POST", "/v1/tools/nothing/rotate-secret", { token: operator })).status).toBe(404);
  });
});
