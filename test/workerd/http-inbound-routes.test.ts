/**
 * Tenant inbound endpoints that route per thread (docs/integrations.md "Routing"): one endpoint of the tenant's
 * (`PUT /v1/inbound-endpoints/{name}`) renders each delivery's session name and route key from the payload; the
 * session is created on first use from a session template, and each route key is its own thread (a chat, a pointer
 * to a conversation of its own). A route key outside the chat alphabet is hashed, its readable form kept. A
 * redelivery runs once, and a delivery refused by its signature or filters creates nothing.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, client, exists, json, lastSeq, stubOf, token, until } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TENANT = "inbound-routes";
const SECRET = "github-app-secret";
const encoder = new TextEncoder();
let counter = 0;

async function hmacHex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
  return [...mac].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** A GitHub delivery to the tenant endpoint `name`, signed as GitHub signs it. */
async function github(
  name: string,
  event: string,
  payload: unknown,
  options: { delivery?: string; signWith?: string; tenant?: string } = {},
): Promise<Response> {
  const body = JSON.stringify(payload);
  return call("POST", `/v1/inbound/${options.tenant ?? TENANT}/${name}`, {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": options.delivery ?? crypto.randomUUID(),
      "x-hub-signature-256": `sha256=${await hmacHex(options.signWith ?? SECRET, body)}`,
    },
  });
}

function comment(repo: string, issue: number, text: string, login = "octocat"): Record<string, unknown> {
  return {
    action: "created",
    issue: { number: issue, title: `Issue ${issue}` },
    comment: { body: text },
    repository: { name: repo, full_name: `octo/${repo}` },
    sender: { login },
  };
}

/** A fresh tenant endpoint (and the session template it creates sessions from); its name and session prefix. */
async function endpoint(
  label: string,
  settings: Record<string, unknown> = {},
  tenant = TENANT,
): Promise<{ name: string; prefix: string }> {
  counter += 1;
  const name = `${label}-${counter}-${Date.now().toString(36)}`;
  const operator = await token(tenant, "operator");
  const template = await call("PUT", `/v1/templates/${name}`, { token: operator, body: { model: "echo" } });
  expect(template.status, await template.clone().text()).toBe(201);
  const prefix = `${name}-`;
  const put = await call("PUT", `/v1/inbound-endpoints/${name}`, {
    token: operator,
    body: {
      format: "github",
      secret: SECRET,
      session: `${prefix}{{repository.name}}`,
      route: "{{repository.name}}-{{issue.number}}",
      sessionTemplate: name,
      template: "{{sender.login}} on #{{issue.number}}: {{comment.body}}",
      events: ["issue_comment"],
      self: "pico-bot",
      fields: ["issue.number", "repository.full_name"],
      ...settings,
    },
  });
  expect(put.status, await put.clone().text()).toBe(201);
  const created = await json<{ url: string }>(put);
  expect(new URL(created.url).pathname).toBe(`/v1/inbound/${tenant}/${name}`);
  return { name, prefix };
}

interface UiMessage {
  readonly role: string;
  readonly parts: { type: string; text?: string }[];
}

/** The user messages' texts of a chat (a thread) of a session. */
async function threadTexts(session: string, chat: string): Promise<string[]> {
  const response = await call("GET", `/v1/sessions/${session}/chat/${chat}/messages`, {
    token: await token(TENANT, "operator"),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  const messages = await json<UiMessage[]>(response);
  return messages
    .filter((message) => message.role === "user")
    .map((message) => message.parts.map((part) => part.text ?? "").join(""));
}

interface UserEntry {
  readonly data?: { inbound?: { source?: Record<string, unknown> } };
}

async function inputSource(session: string, inputId: number): Promise<Record<string, unknown> | undefined> {
  const operator = await token(TENANT, "operator");
  const view = await until(async () => {
    const response = await call("GET", `/v1/sessions/${session}/inputs/${inputId}`, { token: operator });
    const body = await json<{ conversationId: number; result: { status: string; entry?: number } }>(response);
    return body.result.entry === undefined ? undefined : body;
  }, "the input's user entry");
  const entries = await call(
    "GET",
    `/v1/sessions/${session}/conversations/${view.conversationId}/entries?kind=user&limit=50`,
    { token: operator },
  );
  const items = (await json<{ items: (UserEntry & { id: number })[] }>(entries)).items;
  return items.find((entry) => entry.id === view.result.entry)?.data?.inbound?.source;
}

describe("tenant inbound endpoints", () => {
  it("Deliveries are routed to a thread per route key", async () => {
    const { name, prefix } = await endpoint("gh");
    const session = `${prefix}repo`;
    // Two issues: two threads of one session, created on first use from the template.
    const first = await github(name, "issue_comment", comment("repo", 7, "Safari crashes"));
    expect(first.status, await first.clone().text()).toBe(200);
    const seven = await json<{ inputId: number; duplicate: boolean; session: string; thread: string }>(first);
    expect(seven).toMatchObject({ duplicate: false, session, thread: "repo-7" });
    const second = await json<{ inputId: number; thread: string }>(
      await github(name, "issue_comment", comment("repo", 8, "Docs typo")),
    );
    expect(second.thread).toBe("repo-8");
    const created = await json<{ title: string; metadata: Record<string, string>; config: { model: string } }>(
      await call("GET", `/v1/sessions/${session}`, { token: await token(TENANT, "operator") }),
    );
    expect(created.title).toBe(session);
    expect(created.metadata).toMatchObject({ "inbound.endpoint": name });
    // The same issue again: the same thread.
    await github(name, "issue_comment", comment("repo", 7, "Still crashes on 17.2"));
    await until(
      async () => ((await threadTexts(session, "repo-7")).length === 2 ? true : undefined),
      "issue 7's second comment in its thread",
    );
    expect(await threadTexts(session, "repo-7")).toEqual([
      "octocat on #7: Safari crashes",
      "octocat on #7: Still crashes on 17.2",
    ]);
    expect(await threadTexts(session, "repo-8")).toEqual(["octocat on #8: Docs typo"]);
    // Each thread is a conversation of its own, not the root.
    const source7 = await inputSource(session, seven.inputId);
    expect(source7).toMatchObject({ kind: "github", endpoint: name, route: "repo-7", thread: "repo-7" });

    // A route key outside A-Z a-z 0-9 _ - is hashed into a chat id; the readable key is kept.
    const dotted = await github(name, "issue_comment", comment("my.repo", 9, "Dotted"));
    const hashed = await json<{ inputId: number; session: string; thread: string }>(dotted);
    expect(hashed.session).toBe(`${prefix}my.repo`);
    expect(hashed.thread).toMatch(/^r-[0-9a-f]{32}$/);
    expect(await inputSource(hashed.session, hashed.inputId)).toMatchObject({
      route: "my.repo-9",
      thread: hashed.thread,
    });
    expect(await threadTexts(hashed.session, hashed.thread)).toEqual(["octocat on #9: Dotted"]);
    // A route key that names a conversation id (a number, root) is hashed too: it never lands on that conversation.
    const { name: numbered, prefix: numberedPrefix } = await endpoint("num", { route: "{{issue.number}}" });
    const byNumber = await json<{ thread: string }>(await github(numbered, "issue_comment", comment("repo", 1, "One")));
    expect(byNumber.thread).toMatch(/^r-[0-9a-f]{32}$/);
    expect(await threadTexts(`${numberedPrefix}repo`, "root")).toEqual([]);

    // A redelivery (same delivery id) runs once.
    const delivery = crypto.randomUUID();
    const payload = comment("repo", 10, "Once");
    const once = await json<{ inputId: number; duplicate: boolean }>(
      await github(name, "issue_comment", payload, { delivery }),
    );
    const again = await json<{ inputId: number; duplicate: boolean }>(
      await github(name, "issue_comment", payload, { delivery }),
    );
    expect(once.duplicate).toBe(false);
    expect(again).toMatchObject({ inputId: once.inputId, duplicate: true });
    await until(
      async () => ((await threadTexts(session, "repo-10")).length === 1 ? true : undefined),
      "issue 10's comment",
    );
    expect(await threadTexts(session, "repo-10")).toEqual(["octocat on #10: Once"]);

    // The same delivery twice at once, the first of its repository and issue: one session, one thread, one input.
    const racing = crypto.randomUUID();
    const raced = comment("raced", 11, "Twice at once");
    const pair = await Promise.all([
      github(name, "issue_comment", raced, { delivery: racing }),
      github(name, "issue_comment", raced, { delivery: racing }),
    ]);
    const answers = await Promise.all(pair.map((answer) => json<{ inputId: number; duplicate: boolean }>(answer)));
    expect(answers.map((answer) => answer.inputId)).toEqual([answers[0]?.inputId, answers[0]?.inputId]);
    expect(answers.map((answer) => answer.duplicate).sort()).toEqual([false, true]);
    await until(
      async () => ((await threadTexts(`${prefix}raced`, "raced-11")).length === 1 ? true : undefined),
      "the raced comment",
    );
    expect(await threadTexts(`${prefix}raced`, "raced-11")).toEqual(["octocat on #11: Twice at once"]);

    // Refused: nothing is created (a bad signature, an event the filters leave out, the bot's own comment).
    const forged = await github(name, "issue_comment", comment("forged", 1, "x"), { signWith: "not-the-secret" });
    expect(forged.status).toBe(401);
    const push = await github(name, "push", { ref: "refs/heads/main", repository: { name: "pushed" } });
    expect(await json(push)).toMatchObject({ ignored: true });
    const own = await github(name, "issue_comment", comment("own", 1, "my reply", "pico-bot"));
    expect(await json(own)).toMatchObject({ ignored: true });
    for (const repo of ["forged", "pushed", "own"]) expect(await exists(TENANT, `${prefix}${repo}`)).toBe(false);
    // A session the endpoint did not create is never written to, whatever the payload renders: an outsider who
    // chooses a payload value cannot post into another session of the tenant.
    const taken = `${prefix}taken`;
    await (await client(TENANT, "operator")).session(taken).create({});
    const before = await lastSeq(TENANT, taken);
    const intrusion = await github(name, "issue_comment", comment("taken", 1, "into someone else's session"));
    expect(intrusion.status).toBe(409);
    expect(await json(intrusion)).toMatchObject({ code: "conflict", field: "session" });
    expect(await lastSeq(TENANT, taken)).toBe(before);
    // An unknown endpoint answers as a bad signature does.
    expect((await github("no-such-endpoint", "issue_comment", comment("repo", 1, "x"))).status).toBe(401);
  });

  it("A delivery refused at admission leaves no session and no thread", async () => {
    // A tenant of its own: its limits refuse every input once set.
    const tenant = `inbound-refused-${Date.now().toString(36)}`;
    const { name, prefix } = await endpoint("lim", {}, tenant);
    const session = `${prefix}repo`;
    const first = await github(name, "issue_comment", comment("repo", 1, "Admitted"), { tenant });
    expect(first.status, await first.clone().text()).toBe(200);
    await until(async () => ((await stubOf(tenant, session).op("lastSeq")).ok ? true : undefined), "the session");
    const limits = await call("PUT", "/v1/limits", {
      token: await token(tenant, "operator"),
      body: { tenant: { inputsPerDay: 0 } },
    });
    expect(limits.status, await limits.clone().text()).toBe(200);
    // A new thread of an existing session: 429, and the session holds no new conversation, its chat no pointer.
    const seq = await lastSeq(tenant, session);
    const thread = await github(name, "issue_comment", comment("repo", 2, "Over the limit"), { tenant });
    expect(thread.status, await thread.clone().text()).toBe(429);
    const branch = await stubOf(tenant, session).op("chatBranch", "repo-2");
    expect(branch).toEqual({ ok: true, value: {} });
    expect(await lastSeq(tenant, session)).toBe(seq);
    // A new session: 429, and no session was created.
    const fresh = await github(name, "issue_comment", comment("fresh", 1, "Over the limit"), { tenant });
    expect(fresh.status, await fresh.clone().text()).toBe(429);
    expect(await exists(tenant, `${prefix}fresh`)).toBe(false);
    const listed = await call("GET", "/v1/sessions", { token: await token(tenant, "operator") });
    const names = (await json<{ items: { session: string }[] }>(listed)).items.map((item) => item.session);
    expect(names).toEqual([session]);
  });

  it("tenant inbound endpoints are managed by operators only", async () => {
    const { name } = await endpoint("mgmt");
    const operator = await token(TENANT, "operator");
    const listed = await json<{ items: { name: string; secret?: string }[] }>(
      await call("GET", "/v1/inbound-endpoints", { token: operator }),
    );
    const mine = listed.items.find((item) => item.name === name);
    expect(mine).toMatchObject({ name, format: "github", route: "{{repository.name}}-{{issue.number}}" });
    expect(mine).not.toHaveProperty("secret");
    expect((await call("GET", `/v1/inbound-endpoints/${name}`, { token: operator })).status).toBe(200);
    // A client, and an operator token naming its sessions, reach none of these routes.
    const clientToken = await token(TENANT, "client");
    expect((await call("GET", "/v1/inbound-endpoints", { token: clientToken })).status).toBe(403);
    const scoped = await token(TENANT, "operator", { sessions: ["s1"] });
    expect((await call("GET", "/v1/inbound-endpoints", { token: scoped })).status).toBe(401);
    // A standard endpoint's secret is generated and answered once; a rotation answers the next one.
    const standard = await call("PUT", `/v1/inbound-endpoints/${name}-std`, {
      token: operator,
      body: { format: "standard", session: "std-{{repo}}" },
    });
    expect(standard.status).toBe(201);
    const { secret } = await json<{ secret: string }>(standard);
    expect(secret).toMatch(/^whsec_/);
    const rotated = await call("POST", `/v1/inbound-endpoints/${name}-std/rotate-secret`, { token: operator });
    expect(rotated.status, await rotated.clone().text()).toBe(200);
    const next = await json<{ secret: string; previousSecretExpiresAt: string }>(rotated);
    expect(next.secret).toMatch(/^whsec_/);
    expect(next.secret).not.toBe(secret);
    // A github endpoint is given its platform's new secret; deliveries signed with the previous one still verify
    // while GitHub switches (24 h), and so do those signed with the new one.
    expect(
      (await call("POST", `/v1/inbound-endpoints/${name}/rotate-secret`, { token: operator, body: {} })).status,
    ).toBe(400);
    const github2 = await call("POST", `/v1/inbound-endpoints/${name}/rotate-secret`, {
      token: operator,
      body: { secret: "github-app-secret-2" },
    });
    expect(github2.status, await github2.clone().text()).toBe(200);
    expect(await json(github2)).not.toHaveProperty("secret");
    expect((await github(name, "issue_comment", comment("rotated", 1, "old secret"))).status).toBe(200);
    const renewed = await github(name, "issue_comment", comment("rotated", 2, "new secret"), {
      signWith: "github-app-secret-2",
    });
    expect(renewed.status).toBe(200);
    expect((await github(name, "issue_comment", comment("rotated", 3, "x"), { signWith: "other" })).status).toBe(401);
    // Deleted: its deliveries are refused like an unknown endpoint's.
    expect((await call("DELETE", `/v1/inbound-endpoints/${name}`, { token: operator })).status).toBe(200);
    expect((await github(name, "issue_comment", comment("repo", 1, "x"))).status).toBe(401);
    expect((await call("GET", `/v1/inbound-endpoints/${name}`, { token: operator })).status).toBe(404);
  });

  it("an end user cannot mark a session as a tenant endpoint's", async () => {
    // Even where a template lets users set metadata, the inbound.* keys are the service's: a user's session under a
    // name an endpoint renders never becomes one that endpoint routes into.
    const { name, prefix } = await endpoint("mark");
    const template = `${name}-users`;
    const put = await call("PUT", `/v1/templates/${template}`, {
      token: await token(TENANT, "operator"),
      body: { model: "echo", userSettable: ["title", "metadata"] },
    });
    expect(put.status).toBe(201);
    const session = `${prefix}mine`;
    const user = await token(TENANT, "user", { sub: "mallory" });
    const created = await call("PUT", `/v1/sessions/${session}`, {
      token: user,
      body: { template, metadata: { "inbound.endpoint": name } },
    });
    expect(created.status).toBe(403);
    expect(await json(created)).toMatchObject({ code: "forbidden", field: "metadata.inbound.endpoint" });
    expect(await exists(TENANT, session)).toBe(false);
    // Created without it, and marked by a PATCH: refused too.
    expect(
      (await call("PUT", `/v1/sessions/${session}`, { token: user, body: { template, metadata: { team: "a" } } }))
        .status,
    ).toBe(201);
    const patched = await call("PATCH", `/v1/sessions/${session}`, {
      token: user,
      body: { metadata: { "inbound.endpoint": name } },
    });
    expect(patched.status).toBe(403);
    expect(await json(patched)).toMatchObject({ code: "forbidden", field: "metadata.inbound.endpoint" });
    // So a delivery rendering that name is refused, and the user's session gets nothing.
    const before = await lastSeq(TENANT, session);
    expect((await github(name, "issue_comment", comment("mine", 1, "a secret comment"))).status).toBe(409);
    expect(await lastSeq(TENANT, session)).toBe(before);
  });
});
