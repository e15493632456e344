/**
 * What an import carries and what it does not (docs/operations.md "Export and import"): the copy is a new, quiet
 * session. None of the source's events is sent again; a session exists only once the import's settling commit ran,
 * so an import cut before it leaves nothing a route answers; the copy gets a fresh incarnation, the tenant's (or its
 * template's) retention, a paused rig and no new charge; lines are split in one pass and a value nested too deep is
 * refused by its line; an import for a user being erased is refused, inbound endpoints are left out (and said so)
 * and a user's export holds no operator configuration.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import type { SessionObject } from "../../src/worker/session/object.js";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { keyedHashOf, plainHashOf, putUserTemplate, USER_TEMPLATE } from "./users-fixtures.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { splitLines, type SplitStats } from "../../src/worker/session/import-lines.js";
import { exportLines } from "../../src/storage/sqlite-export.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, json, stubOf, token, uniqueSession, until } from "./http-fixtures.js";
import { Receiver, registerEndpoint } from "./event-fixtures.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

let tenants = 0;
function freshTenant(label: string): string {
  tenants += 1;
  return `import-${label}-${tenants}-${Date.now().toString(36)}`;
}

const LONG = "a long answer that the paced echo model streams slowly, long enough to be exported while it runs ...";
const GAP = '{"type":"value.delete","addr":{"scope":{"session":true},"namespace":"pico.export.gap","rewind":false}}';

async function exportOf(tenant: string, session: string, jwt?: string): Promise<string> {
  const response = await call("GET", `/v1/sessions/${session}/export`, {
    token: jwt ?? (await token(tenant, "operator")),
  });
  expect(response.status).toBe(200);
  return new TextDecoder().decode(await response.arrayBuffer());
}

async function importInto(tenant: string, session: string, body: string): Promise<Response> {
  return call("POST", `/v1/sessions/${session}/import`, {
    token: await token(tenant, "operator"),
    rawBody: body,
    headers: { "content-type": "application/jsonl" },
  });
}

/** Replace the first placeholder write of an export's batches with `write` (an export as older code wrote it). */
function withWrite(text: string, write: unknown): string {
  const at = text.indexOf(GAP);
  expect(at).toBeGreaterThan(0);
  return text.slice(0, at) + JSON.stringify(write) + text.slice(at + GAP.length);
}

async function ask(tenant: string, session: string, input: string, wait = true): Promise<Record<string, unknown>> {
  const response = await call("POST", `/v1/sessions/${session}/conversations/root/inputs${wait ? "?wait=10" : ""}`, {
    token: await token(tenant, "operator"),
    body: { input },
  });
  expect(response.status, await response.clone().text()).toBe(201);
  return json(response);
}

describe("An import makes a new, quiet session", () => {
  it("An imported session sends none of the source's events", async () => {
    const tenant = freshTenant("events");
    const receiver = new Receiver();
    setHostSeams({ fetch: receiver.fetch });
    const endpoint = await registerEndpoint(tenant, {
      url: "https://receiver.test/events",
      events: ["input.completed"],
    });
    const operator = await token(tenant, "operator");
    const source = uniqueSession("events-source");
    expect((await call("PUT", `/v1/sessions/${source}`, { token: operator, body: {} })).status).toBe(201);
    expect(await ask(tenant, source, "hello")).toMatchObject({ status: "done" });
    const from = (session: string) => receiver.received.filter((r) => r.event.data["session"] === session);
    await until(async () => (from(source).length === 1 ? true : undefined), "the source's event");
    const sent = from(source).map((r) => r.event.id);

    // The export carries nothing of the outbox; an export written before (with its outbox list) imports without it.
    const text = await exportOf(tenant, source);
    expect(text).not.toContain("edge.outbox");
    const older = withWrite(text, {
      type: "list.append",
      addr: { scope: { session: true }, namespace: "edge.outbox", rewind: false },
      value: {
        id: sent[0],
        type: "input.completed",
        timestamp: 1,
        data: { session: source, seq: 3 },
        to: [endpoint.id],
      },
    });
    for (const [label, body] of [
      ["current", text],
      ["older", older],
    ] as const) {
      const copy = uniqueSession(`events-copy-${label}`);
      expect((await importInto(tenant, copy, body)).status).toBe(201);
      // The copy wakes (restarted, then opened by a read) before anything of its own commits.
      await abortAllDurableObjects();
      expect((await call("GET", `/v1/sessions/${copy}`, { token: operator })).status).toBe(200);
      // The copy's own turn is its first event: nothing of the source's is delivered before it (the outbox is FIFO).
      expect(await ask(tenant, copy, "hello again")).toMatchObject({ status: "done" });
      await until(async () => (from(copy).length === 1 ? true : undefined), `the copy's own event (${label})`);
      expect(from(source).map((r) => r.event.id)).toEqual(sent);
      expect(from(copy).map((r) => r.event.id)).not.toContain(sent[0]);
    }
  });

  it("An import cut before its settling commit leaves no session", async () => {
    const tenant = freshTenant("cut");
    const operator = await token(tenant, "operator");
    const source = uniqueSession("cut-source");
    expect(
      (await call("PUT", `/v1/sessions/${source}`, { token: operator, body: { model: "echo-slow" } })).status,
    ).toBe(201);
    expect(
      (
        await call("POST", `/v1/sessions/${source}/schedules`, {
          token: operator,
          body: { input: "tick", every: 3_600_000 },
        })
      ).status,
    ).toBe(201);
    expect(await ask(tenant, source, LONG, false)).toMatchObject({ status: "placed" });
    const text = await exportOf(tenant, source);

    // The import stages every line, then the object dies before the settling commit.
    const copy = uniqueSession("cut-copy");
    setHostSeams({
      report: () => undefined,
      beforeImportSettle: () => {
        throw new Error("the object died before the settling commit");
      },
    });
    expect((await importInto(tenant, copy, text)).status).toBe(500);
    setHostSeams({});

    // No session: every route answers 404, and nothing is listed.
    const get = (path: string) => call("GET", `/v1/sessions/${copy}${path}`, { token: operator });
    expect((await get("")).status).toBe(404);
    expect((await get("/schedules")).status).toBe(404);
    expect((await get("/tasks?live=true")).status).toBe(404);
    expect((await get("/conversations/root/entries?limit=10")).status).toBe(404);
    expect(
      (await call("POST", `/v1/sessions/${copy}/conversations/root/inputs`, { token: operator, body: { input: "x" } }))
        .status,
    ).toBe(404);
    expect(await stubOf(tenant, copy).exists()).toBe(false);
    const listed = await json<{ items: { session: string }[] }>(await call("GET", "/v1/sessions", { token: operator }));
    expect(listed.items.map((item) => item.session)).not.toContain(copy);

    // The retried import starts clean and settles the copy as a whole import does.
    const retried = await importInto(tenant, copy, text);
    expect(retried.status, await retried.clone().text()).toBe(201);
    const answer = await json<{ aborted: number[]; paused: number[] }>(retried);
    expect(answer.paused).toHaveLength(1);
    expect(answer.aborted.length).toBeGreaterThan(0);
    expect((await get("")).status).toBe(200);
    expect(await json(await get("/schedules"))).toMatchObject({ items: [{ status: "paused" }] });
  });
});

/** `bytes` as a stream of `chunk`-byte reads (as a request body arrives). */
function chunked(bytes: Uint8Array, chunk: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.byteLength) return controller.close();
      controller.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
}

const utf8 = (text: string): number => new TextEncoder().encode(text).byteLength;

describe("An import cut after its settling commit", () => {
  it("An import cut between its settling commit and its directory row is listed by its retry, answered as the first", async () => {
    const tenant = freshTenant("late-cut");
    const operator = await token(tenant, "operator");
    const source = uniqueSession("late-source");
    expect(
      (await call("PUT", `/v1/sessions/${source}`, { token: operator, body: { model: "echo-slow" } })).status,
    ).toBe(201);
    expect(
      (
        await call("POST", `/v1/sessions/${source}/schedules`, {
          token: operator,
          body: { input: "tick", every: 3_600_000 },
        })
      ).status,
    ).toBe(201);
    expect(await ask(tenant, source, LONG, false)).toMatchObject({ status: "placed" });
    const text = await exportOf(tenant, source);
    const listed = async (): Promise<string[]> =>
      (await json<{ items: { session: string }[] }>(await call("GET", "/v1/sessions", { token: operator }))).items.map(
        (item) => item.session,
      );
    const cutAfterSettling = (): void =>
      setHostSeams({
        report: () => undefined,
        afterImportSettle: () => {
          throw new Error("the object died after the settling commit");
        },
      });

    // The settling transaction commits, then the object dies before the directory hears of the copy.
    const copy = uniqueSession("late-copy");
    cutAfterSettling();
    expect((await importInto(tenant, copy, text)).status).toBe(500);
    setHostSeams({});
    expect(await stubOf(tenant, copy).exists()).toBe(true);
    expect(await listed()).not.toContain(copy);

    // The retry with the same body lists the copy and answers what the first import would have.
    const retried = await importInto(tenant, copy, text);
    expect(retried.status, await retried.clone().text()).toBe(201);
    const answer = await json<{ session: string; incarnation: string; aborted: number[]; paused: number[] }>(retried);
    expect(answer).toMatchObject({ session: copy, rigPaused: false, omitted: { inbound: [] } });
    expect(answer.paused).toHaveLength(1);
    expect(answer.aborted.length).toBeGreaterThan(0);
    expect(answer.incarnation).toBe(await stubOf(tenant, copy).incarnation());
    expect(await listed()).toContain(copy);
    expect(await json(await call("GET", `/v1/sessions/${copy}/schedules`, { token: operator }))).toMatchObject({
      items: [{ status: "paused" }],
    });
    // Again: the same answer; another body is a conflict, and changes nothing.
    expect(await json(await importInto(tenant, copy, text))).toEqual(answer);
    const other = await importInto(tenant, copy, text.replace(`"session":"${source}"`, '"session":"someone-else"'));
    expect(other.status).toBe(409);
    expect(await stubOf(tenant, copy).incarnation()).toBe(answer.incarnation);

    // Without a retry, the session's next wake sends its row: an open arms the alarm for the pending row.
    const later = uniqueSession("late-wake");
    cutAfterSettling();
    expect((await importInto(tenant, later, text)).status).toBe(500);
    setHostSeams({});
    expect(await listed()).not.toContain(later);
    expect((await call("GET", `/v1/sessions/${later}`, { token: operator })).status).toBe(200);
    await until(async () => ((await listed()).includes(later) ? true : undefined), "the row sent by the alarm");
  });
});

describe("Import lines", () => {
  it("Import splits lines in one pass, and a deep value is refused with its line", async () => {
    // One pass: a 1 MiB line read 4 KiB at a time is scanned once, not once per chunk.
    const long = `${"x".repeat(1024 * 1024 - 3)}é`;
    const text = `{"a":1}\n${long}\nlast`;
    const bytes = new TextEncoder().encode(text);
    const stats: SplitStats = { read: 0, scanned: 0 };
    const lines: { line: number; text: string }[] = [];
    for await (const one of splitLines(chunked(bytes, 4096), stats)) lines.push(one);
    expect(lines.map((l) => l.line)).toEqual([1, 2, 3]);
    expect(lines.map((l) => l.text)).toEqual(['{"a":1}', long, "last"]);
    expect(stats.read).toBe(bytes.byteLength);
    expect(stats.scanned).toBeLessThanOrEqual(2 * bytes.byteLength);

    // A value nested 60,000 deep is refused by its line, and nothing is created.
    const tenant = freshTenant("deep");
    const operator = await token(tenant, "operator");
    const source = uniqueSession("deep-source");
    expect((await call("PUT", `/v1/sessions/${source}`, { token: operator, body: {} })).status).toBe(201);
    expect(await ask(tenant, source, "hello")).toMatchObject({ status: "done" });
    const exported = await exportOf(tenant, source);
    const [header, ...batches] = exported.slice(0, -1).split("\n");
    const deep = `${"[".repeat(60_000)}${"]".repeat(60_000)}`;
    const last = JSON.parse(batches.at(-1)!) as { first: number; writes: unknown[] };
    const deepLine = `{"first":${last.first + last.writes.length},"writes":[{"type":"value.set","addr":{"scope":{"session":true},"namespace":"app.deep","rewind":false},"value":${deep}}]}`;
    const copy = uniqueSession("deep-copy");
    const refused = await importInto(tenant, copy, [header, ...batches, deepLine, ""].join("\n"));
    expect(refused.status).toBe(422);
    expect(await json(refused)).toMatchObject({ code: "invalid_import", line: batches.length + 2 });
    expect((await call("GET", `/v1/sessions/${copy}`, { token: operator })).status).toBe(404);

    // An export written before lines were bounded (all its batches on one line) still imports.
    const writes = batches.flatMap((line) => (JSON.parse(line) as { writes: unknown[] }).writes);
    const oneLine = `${header}\n${JSON.stringify({ first: 1, writes })}\n`;
    expect((await importInto(tenant, copy, oneLine)).status).toBe(201);

    // Export lines are bounded: at most 1 MiB of writes, or one write alone when it is larger.
    const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
    const stub = ns.get(ns.idFromName(`${tenant}:${uniqueSession("lines")}`));
    await runInDurableObject(stub, async (_instance, state) => {
      const storage = SqliteStorage.open(state.storage);
      await storage.commit({ kind: "main", writes: [{ type: "createConversation", conversation: { id: 1 } }] });
      const sizes = [300, 300, 300, 300, 1_500, 10, 10, 700, 400];
      for (const [i, kib] of sizes.entries())
        await storage.commit({
          kind: "main",
          writes: [
            {
              type: "value.set",
              addr: { scope: { session: true }, namespace: "app.big", key: String(i), rewind: false },
              value: "y".repeat(kib * 1024),
            },
          ],
        });
      const out = [...exportLines(state.storage)];
      expect(out.length).toBeGreaterThan(3);
      for (const line of out) {
        const batch = JSON.parse(line) as { writes: unknown[] };
        const size = batch.writes.reduce<number>((sum, w) => sum + utf8(JSON.stringify(w)), 0);
        if (batch.writes.length > 1) expect(size).toBeLessThanOrEqual(1024 * 1024);
      }
      await storage.close();
    });
  });
});

describe("An imported session's identity, retention, rig and charge", () => {
  it("An imported session gets a fresh incarnation, the tenant's retention, paused hooks and no new charge", async () => {
    const tenant = freshTenant("fresh");
    const operator = await token(tenant, "operator");
    const mayor = await token(tenant, "mayor");
    const path = (session: string, rest = "") => `/v1/sessions/${session}${rest}`;
    expect(
      (await call("PUT", "/v1/retention", { token: operator, body: { retention: { deleteAfterDays: 2 } } })).status,
    ).toBe(200);
    expect(
      (
        await call("PUT", "/v1/templates/weekly", {
          token: operator,
          body: { model: "echo-slow", retention: { deleteAfterDays: 7 } },
        })
      ).status,
    ).toBe(201);

    // A rig whose agent's hook is pending while its conversation answers a slow turn.
    const source = uniqueSession("fresh-source");
    expect((await call("PUT", path(source), { token: operator, body: { template: "weekly" } })).status).toBe(201);
    const registered = await json<{ agent: { conversationId: number } }>(
      await call("PUT", path(source, "/rig/agents/polecat-alpha"), {
        token: mayor,
        body: { role: "polecat", conversation: "new" },
      }),
    );
    const agentConversation = registered.agent.conversationId;
    const busy = await call("POST", path(source, `/conversations/${agentConversation}/inputs`), {
      token: operator,
      body: { input: LONG },
    });
    expect(busy.status).toBe(201);
    const hookSet = await call("PUT", path(source, "/rig/agents/polecat-alpha/hook"), {
      token: mayor,
      body: { bead_id: "gt-1", title: "short" },
    });
    expect(await json(hookSet)).toMatchObject({ status: "pending" });
    const text = await exportOf(tenant, source);

    const copy = uniqueSession("fresh-copy");
    const imported = await importInto(tenant, copy, text);
    expect(imported.status, await imported.clone().text()).toBe(201);
    const answer = await json<{ incarnation: string; aborted: number[] }>(imported);
    expect(answer.aborted.length).toBeGreaterThan(0);
    // The template's retention, captured and armed.
    const details = await until(async () => {
      const got = await json<{ retention?: { deleteAfterDays: number; expiresAt: number } }>(
        await call("GET", path(copy), { token: operator }),
      );
      return got.retention;
    }, "the copy's retention");
    expect(details.deleteAfterDays).toBe(7);
    // The copy's slow turn ends aborted: its conversation is idle, and the pending hook stays pending (GUPP waits).
    const busyId = (await json<{ inputId: number }>(busy)).inputId;
    await until(async () => {
      const r = await json<{ result: { status: string } }>(
        await call("GET", path(copy, `/inputs/${busyId}`), { token: operator }),
      );
      return r.result.status === "queued" || r.result.status === "placed" ? undefined : r;
    }, "the copy's aborted turn");
    // A commit after the abort: any activation GUPP had queued on the commit line would be committed by now.
    expect(await ask(tenant, copy, "are you there?")).toMatchObject({ status: "done" });
    const hook = async (session: string) =>
      json<{ status: string }>(await call("GET", path(session, "/rig/agents/polecat-alpha/hook"), { token: mayor }));
    expect((await hook(copy)).status).toBe("pending");
    const workItems = async (session: string) =>
      (
        await json<{ items: { kind: string; model?: unknown }[] }>(
          await call("GET", path(session, `/conversations/${agentConversation}/entries?limit=100`), {
            token: operator,
          }),
        )
      ).items.filter((e) => e.kind === "user" && JSON.stringify(e.model).includes("Work item gt-1")).length;
    expect(await workItems(copy)).toBe(0);
    // An operator resumes the rig: GUPP activates the hook and accepts its work item.
    const resumed = await call("POST", path(copy, "/rig/resume"), { token: operator });
    expect(await json(resumed)).toEqual({ resumed: true });
    await until(
      async () => ((await hook(copy)).status !== "pending" ? true : undefined),
      "the copy's hook activated",
      1000,
    );
    expect(await workItems(copy)).toBe(1);
    expect(await json(await call("POST", path(copy, "/rig/resume"), { token: operator }))).toEqual({ resumed: false });

    // An export made before incarnations (none in it) imports with a fresh one, and again after a delete, another.
    const bare = await answeredPlain(tenant, "fresh-bare");
    const old = (await exportOf(tenant, bare))
      .replace(/,"incarnation":"[a-z0-9]+"/, "")
      .replace(
        /\{"type":"value\.set","addr":\{"scope":\{"session":true\},"namespace":"edge\.session\.incarnation","rewind":false\},"value":"[a-z0-9]+"\}/,
        GAP,
      );
    expect(old).not.toContain("edge.session.incarnation");
    const again = uniqueSession("fresh-again");
    const first = await json<{ incarnation: string }>(await importInto(tenant, again, old));
    expect(await stubOf(tenant, again).incarnation()).toBe(first.incarnation);
    // The tenant's default retention, for a copy without a template.
    const bareDetails = await until(async () => {
      const got = await json<{ retention?: { deleteAfterDays: number } }>(
        await call("GET", path(again), { token: operator }),
      );
      return got.retention;
    }, "the bare copy's retention");
    expect(bareDetails.deleteAfterDays).toBe(2);
    expect((await call("DELETE", path(again), { token: operator })).status).toBe(200);
    const second = await json<{ incarnation: string }>(await importInto(tenant, again, old));
    expect(second.incarnation).not.toBe(first.incarnation);
    expect(await stubOf(tenant, again).incarnation()).toBe(second.incarnation);

    await importedInputNotMetered();
  });
});

async function answeredPlain(tenant: string, label: string): Promise<string> {
  const name = uniqueSession(label);
  expect((await call("PUT", `/v1/sessions/${name}`, { token: await token(tenant, "operator"), body: {} })).status).toBe(
    201,
  );
  expect(await ask(tenant, name, "hello")).toMatchObject({ status: "done" });
  return name;
}

/** No new charge: an imported input's end (its abort on the copy) is never metered as a new input. */
async function importedInputNotMetered(): Promise<void> {
  const tenant = freshTenant("charge");
  const operator = await token(tenant, "operator");
  const source = uniqueSession("charge-source");
  expect((await call("PUT", `/v1/sessions/${source}`, { token: operator, body: { model: "echo-slow" } })).status).toBe(
    201,
  );
  const placed = await ask(tenant, source, LONG, false);
  const text = await exportOf(tenant, source);
  const copy = uniqueSession("charge-copy");
  expect((await importInto(tenant, copy, text)).status).toBe(201);
  const final = async (session: string) =>
    until(
      async () => {
        const r = await json<{ result: { status: string } }>(
          await call("GET", `/v1/sessions/${session}/inputs/${String(placed["inputId"])}`, { token: operator }),
        );
        return r.result.status === "queued" || r.result.status === "placed" ? undefined : r.result;
      },
      `${session}'s input`,
      1000,
    );
  expect(await final(copy)).toMatchObject({ status: "unanswered", reason: "aborted" });
  expect(await final(source)).toMatchObject({ status: "done" });
  // The copy's own turn: its reports follow the abort's, so once its model call is counted, the abort's is too.
  expect(await ask(tenant, copy, "hello")).toMatchObject({ status: "done" });
  const usage = await until(
    async () => {
      const read = await json<{ items: { inputs: number }[]; models: { calls: number }[] }>(
        await call("GET", "/v1/usage", { token: operator }),
      );
      const calls = read.models.reduce((sum, m) => sum + m.calls, 0);
      const inputs = read.items.reduce((sum, d) => sum + d.inputs, 0);
      return calls >= 2 && inputs >= 2 ? { calls, inputs } : undefined;
    },
    "both sessions' turns metered",
    1000,
  );
  // Two inputs: the source's and the copy's own; the imported one's abort is not a third.
  expect(usage).toEqual({ calls: 2, inputs: 2 });
}

/** A Standard Webhooks delivery to an inbound endpoint, signed as a real sender signs it. */
async function deliver(tenant: string, session: string, name: string, secret: string): Promise<Response> {
  const id = `msg_${crypto.randomUUID()}`;
  const body = JSON.stringify({ build: 7 });
  const seconds = Math.floor(Date.now() / 1000);
  return call("POST", `/v1/inbound/${tenant}/${session}/${name}`, {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(seconds),
      "webhook-signature": new Webhook(secret).sign(id, new Date(seconds * 1000), body),
    },
  });
}

describe("Owners and erasures", () => {
  // Every part of "who may do what" around moving data, in one test: inbound endpoints left out of an import (and
  // named in its answer), a user's export without the operator's inbound configuration or sealed secrets, 409
  // user_erasing on an import for a user being erased (under either hash version), the erasure's keyed subHash and an
  // erasure recorded under the plain SHA-256 before it still refusing and deleting its user, the variable cap counting
  // a template's defaults, and no "me" for a client token that carries a sub.
  it("Imports and exports respect owners and erasures", async () => {
    const tenant = freshTenant("owners");
    const operator = await token(tenant, "operator");
    await putUserTemplate(tenant);
    const sub = `u${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const alice = await token(tenant, "user", { sub });
    const source = uniqueSession("owners-source");
    expect(
      (await call("PUT", `/v1/sessions/${source}`, { token: alice, body: { template: USER_TEMPLATE } })).status,
    ).toBe(201);
    expect(
      (
        await call("POST", `/v1/sessions/${source}/conversations/root/inputs?wait=10`, {
          token: alice,
          body: { input: "hello" },
        })
      ).status,
    ).toBe(201);
    const put = await call("PUT", `/v1/sessions/${source}/inbound/ci`, {
      token: operator,
      body: { format: "standard" },
    });
    expect(put.status).toBe(201);
    const secret = (await json<{ secret: string }>(put)).secret;
    expect((await deliver(tenant, source, "ci", secret)).status).toBe(200);

    // The user's export holds none of the operator's inbound configuration: no endpoint, no sealed secret.
    const mine = await exportOf(tenant, source, alice);
    expect(mine).not.toContain("edge.inbound");
    expect(mine).not.toContain('"kid"');
    expect(mine).not.toContain("edge.replay");
    const whole = await exportOf(tenant, source);
    expect(whole).toContain("edge.inbound");

    // The import leaves the inbound endpoint out and says so; a delivery to the copy's name finds no endpoint (the
    // answer to any unknown endpoint), where a carried one would fail to open its secret (500).
    const copy = uniqueSession("owners-copy");
    const imported = await importInto(tenant, copy, whole);
    expect(imported.status, await imported.clone().text()).toBe(201);
    expect(await json(imported)).toMatchObject({ omitted: { inbound: ["ci"] }, rigPaused: false });
    expect(await json(await call("GET", `/v1/sessions/${copy}/inbound`, { token: operator }))).toEqual({ items: [] });
    expect((await deliver(tenant, copy, "ci", secret)).status).toBe(401);
    // The copy keeps its owner: alice reads it.
    expect((await call("GET", `/v1/sessions/${copy}`, { token: alice })).status).toBe(200);

    // Only a user token has a "me": a client token carrying alice's sub reads none of her usage.
    const clientWithSub = await call("GET", "/v1/me/usage", { token: await token(tenant, "client", { sub }) });
    expect(clientWithSub.status).toBe(403);
    expect(await clientWithSub.text()).not.toContain("totalTokens");
    expect((await call("GET", "/v1/me/usage", { token: alice })).status).toBe(200);

    // The variable cap counts the merged set: 32 of the body's and the template's default are 33, refused by field,
    // and nothing is created.
    const withDefault = await call("PUT", "/v1/templates/with-default", {
      token: operator,
      body: { model: "echo", variables: { from_template: "default" } },
    });
    expect(withDefault.status, await withDefault.clone().text()).toBe(201);
    const over = uniqueSession("owners-over");
    const full = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`v${i}`, `value ${i}`]));
    const overCap = await call("PUT", `/v1/sessions/${over}`, {
      token: operator,
      body: { template: "with-default", variables: full },
    });
    expect(overCap.status, await overCap.clone().text()).toBe(400);
    expect(await json(overCap)).toMatchObject({ field: "variables" });
    expect((await call("GET", `/v1/sessions/${over}`, { token: operator })).status).toBe(404);

    // While alice's erasure runs, an import of her session is refused as her creates are, and nothing is created.
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant)) as DurableObjectStub<DirectoryObject>;
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      instance.eraseRoundsLeft = 0;
    });
    const started = await call("POST", `/v1/users/${sub}/erase`, { token: operator });
    expect(started.status).toBe(202);
    const during = uniqueSession("owners-during");
    const refused = await importInto(tenant, during, whole);
    expect(refused.status).toBe(409);
    expect(await json(refused)).toMatchObject({ code: "user_erasing" });
    expect(await stubOf(tenant, during).exists()).toBe(false);
    expect((await call("GET", `/v1/sessions/${during}`, { token: operator })).status).toBe(404);

    // The record names alice by the keyed hash (version 2), which a list of candidate subs cannot reproduce without
    // SUBJECT_HASH_KEY; per tenant, so another tenant's record of the same sub differs.
    const erasure = await json<{ id: string; subHash: string; subHashVersion: number }>(started);
    expect(erasure.subHashVersion).toBe(2);
    expect(erasure.subHash).toBe(await keyedHashOf(env.SUBJECT_HASH_KEY, tenant, sub));
    expect(erasure.subHash).not.toBe(await plainHashOf(sub));
    expect(erasure.subHash).not.toBe(await keyedHashOf(env.SUBJECT_HASH_KEY, `${tenant}-other`, sub));

    // An erasure recorded before the keyed hash (version 1, plain SHA-256, its sub in clear as the oldest rows hold
    // it): carol's, running, with her session pending.
    const carol = `c${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const carols = uniqueSession("owners-carol");
    expect(
      (
        await call("PUT", `/v1/sessions/${carols}`, {
          token: await token(tenant, "user", { sub: carol }),
          body: { template: USER_TEMPLATE },
        })
      ).status,
    ).toBe(201);
    const carolsExport = await exportOf(tenant, carols);
    const old = `er_${crypto.randomUUID().replaceAll("-", "")}`;
    const cutoff = Math.floor(Date.now() / 1000) + 1;
    const plain = await plainHashOf(carol);
    await runInDurableObject(directory, (_instance: DirectoryObject, state) => {
      const sql = state.storage.sql;
      sql.exec(
        "INSERT INTO erasures (id, sub_hash, phase, cutoff, found, deleted, started_at, tenant) VALUES (?, ?, 'sessions', ?, 1, 0, ?, ?)",
        old,
        plain,
        cutoff,
        Date.now(),
        tenant,
      );
      sql.exec(
        "INSERT INTO erasure_work (id, sub, tenant, next_at) VALUES (?, ?, ?, ?)",
        old,
        carol,
        tenant,
        Date.now(),
      );
      sql.exec("INSERT INTO erasure_sessions (id, session) VALUES (?, ?)", old, carols);
    });
    // It refuses carol's import, answers her erase with itself (running), and its cutoff refuses her older tokens.
    const carolImport = await importInto(tenant, uniqueSession("owners-carol-copy"), carolsExport);
    expect(carolImport.status).toBe(409);
    expect(await json(carolImport)).toMatchObject({ code: "user_erasing" });
    const again = await call("POST", `/v1/users/${carol}/erase`, { token: operator });
    expect(again.status).toBe(200);
    expect(await json(again)).toMatchObject({ id: old, subHash: plain, subHashVersion: 1, status: "running" });
    expect(await directory.revokedAt(carol)).toBe(cutoff);
    // And it still deletes her session: the session compares its owner under the record's version.
    await runInDurableObject(directory, async (instance: DirectoryObject) => {
      instance.eraseRoundsLeft = undefined;
      for (let round = 0; round < 5 && instance.erasure(old)?.status !== "done"; round++) await instance.alarm();
    });
    expect(await json(await call("GET", `/v1/erasures/${old}`, { token: operator }))).toMatchObject({
      status: "done",
      sessionsDeleted: 1,
      subHashVersion: 1,
    });
    expect((await call("GET", `/v1/sessions/${carols}`, { token: operator })).status).toBe(404);
  });
});
