/**
 * The HTTP transport of remote calls (src/worker/remote/http-transport.ts) on a scripted fetch and the manual
 * clock: what one attempt sends, how each answer is read, the per-attempt timeout on the injected clock,
 * the 1 MB cap counted while reading, and cancellation.
 */
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { RemoteRequest } from "../../src/kinds/remote-call-state.js";
import { HttpTransport, MAX_REMOTE_RESPONSE_BYTES } from "../../src/worker/remote/http-transport.js";
import { toolSecret } from "../../src/worker/crypto/webhooks.js";
import { ManualClock, ManualTime } from "./session-fixtures.js";

const MASTER = "a-master-secret-for-transport-tests";

const REQUEST: RemoteRequest = {
  taskId: 42,
  attempt: 1,
  tenant: "acme",
  session: "demo",
  conversationId: 1,
  toolCallId: "call_1",
  target: {
    type: "http",
    tool: "lookup",
    version: 3,
    url: "https://product.test/lookup",
    timeoutMs: 5000,
    idempotent: false,
  },
  name: "lookup",
  arguments: { id: 1 },
};

function transport(
  fetch: (request: Request) => Promise<Response>,
  clock = new ManualClock(new ManualTime()),
): HttpTransport {
  return new HttpTransport({ fetch, clock, secret: (tenant, tool) => toolSecret(MASTER, tenant, tool) });
}

const answer =
  (status: number, body?: string, type = "application/json") =>
  () =>
    Promise.resolve(
      new Response(body ?? null, { status, headers: body === undefined ? {} : { "content-type": type } }),
    );

describe("HTTP transport", () => {
  it("POSTs the call signed with the tool's secret, keyed by session and task", async () => {
    const seen: Request[] = [];
    const reply = await transport(async (request) => {
      seen.push(request.clone());
      return new Response(JSON.stringify({ output: "ok" }), { status: 200 });
    }).send(REQUEST, undefined);
    expect(reply).toEqual({ type: "result", output: "ok", isError: false });
    const request = seen[0] as Request;
    expect(request.method).toBe("POST");
    expect(request.url).toBe("https://product.test/lookup");
    expect(request.headers.get("content-type")).toBe("application/json");
    expect(request.headers.get("idempotency-key")).toBe("demo:42");
    expect(request.headers.get("webhook-id")).toBe("demo:42");
    const text = await request.text();
    expect(JSON.parse(text)).toEqual({
      session: "demo",
      conversationId: 1,
      taskId: 42,
      toolCallId: "call_1",
      name: "lookup",
      arguments: { id: 1 },
    });
    new Webhook(await toolSecret(MASTER, "acme", "lookup")).verify(text, Object.fromEntries(request.headers));
    await expect(toolSecret(MASTER, "acme", "other")).resolves.not.toBe(await toolSecret(MASTER, "acme", "lookup"));
    // What `WEBHOOK_MASTER_SECRET=<MASTER> npm run tool-secret -- --tenant acme --tool lookup` prints.
    expect(await toolSecret(MASTER, "acme", "lookup")).toBe("whsec_3FZlPlDzQyttus0skqV3Vwwq72HBMEFk6OO4PGkVho0=");
  });

  it("reads each kind of answer", async () => {
    expect(
      await transport(answer(200, JSON.stringify({ output: { n: 1 }, isError: true }))).send(REQUEST, undefined),
    ).toEqual({ type: "result", output: { n: 1 }, isError: true });
    expect(await transport(answer(202)).send(REQUEST, undefined)).toEqual({ type: "accepted" });
    expect(await transport(answer(200, "not json")).send(REQUEST, undefined)).toMatchObject({ type: "bad_response" });
    expect(await transport(answer(200, JSON.stringify({ result: 1 }))).send(REQUEST, undefined)).toMatchObject({
      type: "bad_response",
    });
    expect(
      await transport(answer(200, JSON.stringify({ output: 1, isError: "yes" }))).send(REQUEST, undefined),
    ).toMatchObject({ type: "bad_response" });
    const problem = { type: "about:blank", title: "Bad Request", status: 400, detail: "id must be positive" };
    expect(
      await transport(answer(400, JSON.stringify(problem), "application/problem+json")).send(REQUEST, undefined),
    ).toEqual({
      type: "rejected",
      status: 400,
      detail: "id must be positive",
      problem,
    });
    expect(await transport(answer(503, "overloaded", "text/plain")).send(REQUEST, undefined)).toEqual({
      type: "failed",
      status: 503,
      detail: "HTTP 503: overloaded",
    });
    expect(await transport(() => Promise.reject(new TypeError("connection reset"))).send(REQUEST, undefined)).toEqual({
      type: "failed",
      detail: "the request failed: connection reset",
    });
  });

  it("a body over 1 MB is too_large, counted while it is read", async () => {
    let pulled = 0;
    const chunk = new Uint8Array(64 * 1024).fill(32);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const reply = await transport(() => Promise.resolve(new Response(body, { status: 200 }))).send(REQUEST, undefined);
    expect(reply).toEqual({ type: "too_large" });
    // Reading stopped soon after the cap; the endless body was not drained.
    expect(pulled).toBeLessThan(MAX_REMOTE_RESPONSE_BYTES + 4 * chunk.byteLength);
  });

  it("an attempt times out on the injected clock", async () => {
    const time = new ManualTime();
    const clock = new ManualClock(time);
    let aborted = false;
    const pending = transport(
      (request) =>
        new Promise<Response>((_resolve, reject) => {
          request.signal.addEventListener("abort", () => {
            aborted = true;
            reject(new Error("aborted"));
          });
        }),
      clock,
    ).send(REQUEST, undefined);
    await new Promise((resolve) => setTimeout(resolve, 10));
    clock.advanceTo(time.now + 4999);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(aborted).toBe(false);
    clock.advanceTo(time.now + 1);
    expect(await pending).toEqual({ type: "failed", detail: "no answer within 5000 ms" });
    expect(aborted).toBe(true);
  });

  it("the caller's cancellation ends the attempt with its reason", async () => {
    const controller = new AbortController();
    const pending = transport(
      (request) =>
        new Promise<Response>((_resolve, reject) =>
          request.signal.addEventListener("abort", () => reject(new Error("aborted"))),
        ),
    ).send(REQUEST, controller.signal);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const reason = new Error("the task was cancelled");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it("a secret that cannot be derived sends nothing", async () => {
    let sent = 0;
    const failing = new HttpTransport({
      fetch: () => {
        sent += 1;
        return Promise.resolve(new Response(null, { status: 200 }));
      },
      clock: new ManualClock(new ManualTime()),
      secret: () => Promise.reject(new Error("WEBHOOK_MASTER_SECRET is not set")),
    });
    await expect(failing.send(REQUEST, undefined)).rejects.toThrow("WEBHOOK_MASTER_SECRET is not set");
    expect(sent).toBe(0);
  });
});
