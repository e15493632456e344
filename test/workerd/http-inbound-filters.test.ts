/**
 * Inbound deliveries for integrations that run for months (docs/integrations.md "Filters and loops", "What the model
 * sees", "Tie back"): the model gets the rendered template, never the payload, which the user entry keeps in its data
 * for operators; `events`, `when`, `ignore` and `self` leave deliveries out (200 `{ ignored: true, reason }`, nothing
 * written); and `input.completed` and `turn.failed` of an inbound input carry its `source`, with the fields the
 * endpoint names (and, for a tenant endpoint's delivery, the route it took and its thread).
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Env } from "../../src/worker/env.js";
import { sessionObjectName } from "../../src/worker/identity/owner.js";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, client, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";
import { Receiver, registerEndpoint } from "./event-fixtures.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

const TENANT = "inbound-filters";
const SECRET = "github-app-secret";
const encoder = new TextEncoder();

async function hmacHex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
  return [...mac].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** A GitHub delivery to a session's endpoint `github` (or to a path), signed as GitHub signs it. */
async function github(session: string, event: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  const path = session.startsWith("/") ? session : `/v1/inbound/${TENANT}/${session}/github`;
  return call("POST", path, {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": crypto.randomUUID(),
      "x-hub-signature-256": `sha256=${await hmacHex(SECRET, body)}`,
    },
  });
}

function comment(login: string, action = "created", body = "Does it work on Safari?"): Record<string, unknown> {
  return {
    action,
    issue: { number: 7, title: "Safari crash", body: "PAYLOAD-ONLY-ISSUE-BODY" },
    comment: { body },
    repository: { full_name: "octo/repo" },
    sender: { login },
  };
}

const REPO = { name: "repo", full_name: "octo/repo" };

/** Whether the root's live turn has streamed some text (read from its resumable UI message stream). */
async function streamedText(session: string, bearer: string): Promise<boolean> {
  const response = await call("GET", `/v1/sessions/${session}/chat/root/stream`, { token: bearer });
  if (response.status !== 200 || response.body === null) return false;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (!text.includes('"text-delta"')) {
      const { value, done } = await reader.read();
      if (done) return false;
      text += decoder.decode(value, { stream: true });
    }
    return true;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function sessionObject(tenant: string, session: string): DurableObjectStub {
  const namespace = (env as unknown as Env).SESSIONS;
  return namespace.get(namespace.idFromName(sessionObjectName(tenant, session)));
}

/** A session (of this config) with a GitHub endpoint of these settings. */
async function sessionWith(
  label: string,
  settings: Record<string, unknown>,
  config: Record<string, unknown> = {},
): Promise<string> {
  const session = uniqueSession(label);
  await (await client(TENANT)).session(session).create(config);
  const put = await call("PUT", `/v1/sessions/${session}/inbound/github`, {
    token: await token(TENANT, "operator"),
    body: {
      format: "github",
      secret: SECRET,
      template: "{{sender.login}} on {{repository.full_name}}#{{issue.number}}: {{comment.body}}",
      ...settings,
    },
  });
  expect(put.status, await put.clone().text()).toBe(201);
  return session;
}

interface UserEntry {
  readonly model?: { content: string | { type: string; text?: string }[] }[];
  readonly data?: { inbound?: { payload?: unknown; payloadWithheld?: boolean; source?: Record<string, unknown> } };
}

async function userEntries(session: string, bearer?: string): Promise<UserEntry[]> {
  const response = await call("GET", `/v1/sessions/${session}/conversations/root/entries?kind=user&limit=50`, {
    token: bearer ?? (await token(TENANT, "operator")),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return (await json<{ items: UserEntry[] }>(response)).items;
}

/** A body's text, whatever its content type (an export's JSONL). */
async function bodyText(response: Response): Promise<string> {
  return new TextDecoder().decode(await response.arrayBuffer());
}

/** The first event of an SSE response (a watch's view), then the stream is closed. */
async function firstSseEvent(response: Response): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (!text.includes("\n\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return text;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

describe("inbound deliveries", () => {
  it("An inbound payload is kept for operators and never reaches the model", async () => {
    const session = await sessionWith("in-payload", {});
    const payload = comment("octocat");
    const delivered = await github(session, "issue_comment", payload);
    expect(delivered.status).toBe(200);
    const { inputId } = await json<{ inputId: number }>(delivered);
    const api = await client(TENANT);
    const done = await until(async () => {
      const view = await api.session(session).input(inputId);
      return view.result.status === "done" ? view : undefined;
    }, "the delivery's answer");
    const [entry] = await userEntries(session);
    // The model's message is the rendered template alone.
    expect(JSON.stringify(entry?.model)).toContain("octocat on octo/repo#7: Does it work on Safari?");
    expect(JSON.stringify(entry?.model)).not.toContain("PAYLOAD-ONLY-ISSUE-BODY");
    expect(done.outputText ?? "").not.toContain("PAYLOAD-ONLY-ISSUE-BODY");
    // The payload is in the entry's data, whole, for operators.
    expect(entry?.data?.inbound?.payload).toEqual(payload);
    expect(entry?.data?.inbound?.source).toMatchObject({ kind: "github", endpoint: "github", event: "issue_comment" });
    // An end user's token reading the same entry sees where it came from, never the payload: not in the transcript,
    // not in a watch's view, not in the user's export.
    const user = await token(TENANT, "user", { sub: "alice", sessions: [session] });
    const [shown] = await userEntries(session, user);
    expect(shown?.data?.inbound?.source).toEqual(entry?.data?.inbound?.source);
    expect(JSON.stringify(shown?.data)).not.toContain("PAYLOAD-ONLY-ISSUE-BODY");
    expect(shown?.data?.inbound).toMatchObject({ payloadWithheld: true });
    const watch = await call("GET", `/v1/sessions/${session}/conversations/root/watch`, { token: user });
    expect(watch.status).toBe(200);
    const view = await firstSseEvent(watch);
    expect(view).toContain("Does it work on Safari?");
    expect(view).not.toContain("PAYLOAD-ONLY-ISSUE-BODY");
    const exported = await call("GET", `/v1/sessions/${session}/export`, { token: user });
    expect(exported.status).toBe(200);
    expect(await bodyText(exported)).not.toContain("PAYLOAD-ONLY-ISSUE-BODY");
    // The operator's export keeps it.
    const whole = await call("GET", `/v1/sessions/${session}/export`, { token: await token(TENANT, "operator") });
    expect(await bodyText(whole)).toContain("PAYLOAD-ONLY-ISSUE-BODY");
  });

  it("A delivery that does not match the endpoint's events, condition or senders creates nothing", async () => {
    const session = await sessionWith("in-filters", {
      events: ["issues", "issue_comment"],
      when: [
        { path: "action", in: ["opened", "created"] },
        { path: "issue.number", exists: true },
      ],
      ignore: ["dependabot[bot]"],
      self: "pico-bot",
    });
    const before = await lastSeq(TENANT, session);
    const refusals: [string, unknown][] = [
      ["push", { ref: "refs/heads/main", sender: { login: "octocat" }, repository: { full_name: "octo/repo" } }],
      ["issue_comment", comment("octocat", "deleted")],
      ["issue_comment", comment("pico-bot")],
      ["issue_comment", comment("dependabot[bot]")],
      ["issue_comment", { ...comment("octocat"), issue: undefined }],
    ];
    for (const [event, payload] of refusals) {
      const answer = await github(session, event, payload);
      expect(answer.status).toBe(200);
      const body = await json<{ ignored?: boolean; reason?: string }>(answer);
      expect(body.ignored, `${event} ${JSON.stringify(payload)}`).toBe(true);
      expect(typeof body.reason).toBe("string");
    }
    expect(await lastSeq(TENANT, session)).toBe(before);
    // One that matches is an input.
    const passed = await github(session, "issue_comment", comment("octocat"));
    expect(await json(passed)).toMatchObject({ duplicate: false });
    expect(await lastSeq(TENANT, session)).toBeGreaterThan(before);
    // The filters are part of the endpoint's config.
    const config = await json(
      await call("GET", `/v1/sessions/${session}/inbound/github`, { token: await token(TENANT, "operator") }),
    );
    expect(config).toMatchObject({
      events: ["issues", "issue_comment"],
      ignore: ["dependabot[bot]"],
      self: "pico-bot",
    });
  });

  it("An inbound input's events carry its source", async () => {
    const receiver = new Receiver();
    setHostSeams({ fetch: receiver.fetch });
    await registerEndpoint(TENANT, {
      url: "https://receiver.test/github-app",
      events: ["input.completed", "turn.failed"],
    });
    const session = await sessionWith("in-source", { fields: ["issue.number", "repository.full_name"] });
    const delivered = await github(session, "issue_comment", comment("octocat"));
    const { inputId } = await json<{ inputId: number }>(delivered);
    const completed = await until(
      async () =>
        receiver.received.find(
          (request) => request.event.type === "input.completed" && request.event.data["inputId"] === inputId,
        ),
      "input.completed of the delivery",
    );
    expect(completed.event.data["source"]).toEqual({
      kind: "github",
      endpoint: "github",
      deliveryId: expect.any(String),
      event: "issue_comment",
      fields: { "issue.number": 7, "repository.full_name": "octo/repo" },
    });
    // An input that came from no delivery carries none.
    const api = await client(TENANT);
    const plain = await api.session(session).conversation("root").accept("hello", { wait: 10 });
    const other = await until(
      async () =>
        receiver.received.find(
          (request) => request.event.type === "input.completed" && request.event.data["inputId"] === plain.inputId,
        ),
      "input.completed of a plain input",
    );
    expect(other.event.data).not.toHaveProperty("source");

    // A tenant endpoint's delivery: its source names the route it took (the readable key) and its thread.
    const operator = await token(TENANT, "operator");
    const routed = `routed-${Date.now().toString(36)}`;
    const endpoint = await call("PUT", `/v1/inbound-endpoints/${routed}`, {
      token: operator,
      body: {
        format: "github",
        secret: SECRET,
        session: `${routed}-{{repository.name}}`,
        route: "{{repository.full_name}}#{{issue.number}}",
        template: "{{comment.body}}",
        fields: ["issue.number", "repository.full_name"],
      },
    });
    expect(endpoint.status, await endpoint.clone().text()).toBe(201);
    const routedDelivery = await json<{ inputId: number; session: string; thread: string }>(
      await github(`/v1/inbound/${TENANT}/${routed}`, "issue_comment", { ...comment("octocat"), repository: REPO }),
    );
    const routedCompleted = await until(
      async () =>
        receiver.received.find(
          (request) =>
            request.event.type === "input.completed" &&
            request.event.data["session"] === routedDelivery.session &&
            request.event.data["inputId"] === routedDelivery.inputId,
        ),
      "input.completed of the routed delivery",
    );
    expect(routedCompleted.event.data["source"]).toEqual({
      kind: "github",
      endpoint: routed,
      deliveryId: expect.any(String),
      event: "issue_comment",
      route: "octo/repo#7",
      thread: routedDelivery.thread,
      fields: { "issue.number": 7, "repository.full_name": "octo/repo" },
    });

    // turn.failed carries it too. A turn that fails: the paced echo model, killed mid-answer, under onInterrupt "fail".
    const failing = await sessionWith(
      "in-failed",
      { fields: ["issue.number"] },
      { model: "echo-slow", onInterrupt: "fail" },
    );
    const slow = await github(
      `/v1/inbound/${TENANT}/${failing}/github`,
      "issue_comment",
      comment("octocat", "created", "a comment long enough that the paced echo model is still answering it"),
    );
    const killed = (await json<{ inputId: number }>(slow)).inputId;
    const status = async (): Promise<string> =>
      (
        await json<{ result: { status: string } }>(
          await call("GET", `/v1/sessions/${failing}/inputs/${killed}`, { token: operator }),
        )
      ).result.status;
    await until(async () => ((await status()) === "placed" ? true : undefined), "the delivery's turn to start");
    // Killed once part of the answer is on disk (the chat's resumable stream replays it from there).
    await until(async () => ((await streamedText(failing, operator)) ? true : undefined), "part of the answer");
    const object = sessionObject(TENANT, failing);
    await runInDurableObject(object, (_instance, state) => state.abort("killed by the test")).catch(() => undefined);
    const failed = await until(async () => {
      await runDurableObjectAlarm(object).catch(() => undefined);
      await status();
      return receiver.received.find(
        (request) => request.event.type === "turn.failed" && request.event.data["session"] === failing,
      );
    }, "turn.failed of the delivery's turn");
    expect(failed.event.data["inputIds"]).toEqual([killed]);
    expect(failed.event.data["source"]).toEqual({
      kind: "github",
      endpoint: "github",
      deliveryId: expect.any(String),
      event: "issue_comment",
      fields: { "issue.number": 7 },
    });
  });
});
