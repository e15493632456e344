/**
 * Structured logs (issue 14): one JSON line per request (request id, tenant, session, conversation,
 * route, status, duration) and per task invocation (task, kind, method, outcome, duration), never a
 * token, a query string or input text.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setLogSink } from "../../src/worker/log.js";
import { client, token, uniqueSession, until, watchToken, call } from "./http-fixtures.js";

afterEach(async () => {
  setLogSink(undefined);
  await abortAllDurableObjects();
});

describe("logs", () => {
  it("one JSON line per request and per task invocation, without tokens or input text", async () => {
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    const tenant = "logs";
    const session = uniqueSession("logs");
    const api = await client(tenant);
    await api.session(session).create({});
    const secret = "a secret sentence the user typed";
    await api.session(session).conversation("root").accept(secret, { wait: 10 });
    const jwt = await token(tenant, "client");
    const watch = await watchToken(tenant, session, "root");
    const stream = await call("GET", `/v1/sessions/${session}/conversations/root/watch?access_token=${watch}`);
    await stream.body?.cancel();
    const parsed = await until(async () => {
      const all = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      return all.some((l) => l["type"] === "task" && l["kind"] === "generation") ? all : undefined;
    }, "a task line");
    const requests = parsed.filter((l) => l["type"] === "request");
    expect(requests.find((l) => l["method"] === "POST" && String(l["route"]).endsWith("/inputs"))).toMatchObject({
      tenant,
      session,
      conversation: "root",
      status: 201,
      route: "/v1/sessions/:session/conversations/:conversation/inputs",
    });
    for (const l of requests) expect(typeof l["requestId"]).toBe("string");
    expect(parsed.find((l) => l["type"] === "task")).toMatchObject({ outcome: "returned", method: "execute" });
    const text = lines.join("\n");
    for (const forbidden of [secret, jwt, watch, "access_token"]) expect(text).not.toContain(forbidden);
  });
});
