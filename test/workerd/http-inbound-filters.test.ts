/**
 * Inbound deliveries for integrations that run for months (docs/integrations.md "Filters and loops", "What the model
 * sees", "Tie back"): the model gets the rendered template, never the payload, which the user entry keeps in its data
 * for operators; `events`, `when`, `ignore` and `self` leave deliveries out (200 `{ ignored: true, reason }`, nothing
 * written); and `input.completed` of an inbound input carries its `source`, with the fields the endpoint names.
 */
import { abortAllDurableObjects } from "cloudflare:test";
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

/** A GitHub delivery, signed as GitHub signs it. */
async function github(session: string, event: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  return call("POST", `/v1/inbound/${TENANT}/${session}/github`, {
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

/** A session with a GitHub endpoint of these settings. */
async function sessionWith(label: string, settings: Record<string, unknown>): Promise<string> {
  const session = uniqueSession(label);
  await (await client(TENANT)).session(session).create({});
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
  readonly data?: { inbound?: { payload?: unknown; source?: Record<string, unknown> } };
}

async function userEntries(session: string): Promise<UserEntry[]> {
  const response = await call("GET", `/v1/sessions/${session}/conversations/root/entries?kind=user&limit=50`, {
    token: await token(TENANT, "operator"),
  });
  return (await json<{ items: UserEntry[] }>(response)).items;
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
    await registerEndpoint(TENANT, { url: "https://receiver.test/github-app", events: ["input.completed"] });
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
  });
});
