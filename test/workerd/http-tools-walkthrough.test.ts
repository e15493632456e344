/**
 * docs/tools.md "A walk with curl" as a test, step by step with the same bodies and routes, through the
 * Worker's fetch; the product's endpoint (`npm run tool-endpoint` in the doc) sits on HostSeams.fetch and
 * answers as scripts/tool-endpoint.ts does: `/lookup` 200 at once, `/later` 202 and then a signed result.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, token, until } from "./http-fixtures.js";
import { ok, ProductEndpoint, type SeenRequest } from "./product-endpoint.js";

const TENANT = "acme";
const SESSION = "shop";

// The bodies of docs/tools.md, verbatim.
const LOOKUP =
  '{"description":"Look up an order by its id","parameters":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"handler":{"type":"http","url":"http://127.0.0.1:8788/lookup","idempotent":true}}';
const REFUND =
  '{"description":"Refund an order","parameters":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"handler":{"type":"http","url":"http://127.0.0.1:8788/later"},"approval":"always"}';
const CONFIRM =
  '{"description":"Ask the user to confirm","parameters":{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]},"handler":{"type":"client"}}';

type InputResult = { status: string; answer?: number };
interface Accepted {
  inputId: number;
  status: string;
  answer?: unknown;
}
interface PendingItem {
  id: string;
  type: string;
  taskId: number;
  conversationId: number;
  name: string;
  arguments: Record<string, unknown>;
  createdAt: number;
  deadline?: number;
}

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

/** What `curl -d '...'` sends: the raw body. */
async function send(
  method: string,
  path: string,
  tokenOf: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return call(method, path, {
    token: tokenOf,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { rawBody: body }),
  });
}

async function expectStatus(response: Response, status: number): Promise<Record<string, unknown>> {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  return JSON.parse(text) as Record<string, unknown>;
}

describe("docs/tools.md walk", () => {
  it("defines an HTTP tool, an approval and a client tool, calls each with the echo model and answers the pending ones", async () => {
    const endpoint = new ProductEndpoint(TENANT, (seen) =>
      seen.path === "/later"
        ? new Response(JSON.stringify({ accepted: true }), { status: 202 })
        : ok({ id: seen.body.arguments["id"], status: "shipped", eta: "2 days" }),
    );
    endpoint.install();
    const O = await token(TENANT, "operator");
    const T = await token(TENANT, "client");
    const api = `/v1/sessions/${SESSION}`;
    const input = async (id: number): Promise<InputResult> =>
      (await json<{ result: InputResult }>(await send("GET", `${api}/inputs/${id}`, T))).result;
    const answerText = async (id: number): Promise<string> => {
      const result = await until(
        async () => {
          const r = await input(id);
          return r.status === "done" || r.status === "unanswered" ? r : undefined;
        },
        `input ${id} answered`,
        1_000,
      );
      expect(result.status).toBe("done");
      const entries = await json<{ items: { id: number; kind: string }[] }>(
        await send("GET", `${api}/conversations/root/entries?limit=200`, T),
      );
      return JSON.stringify(entries.items.find((e) => e.id === result.answer));
    };

    // 1. An HTTP tool.
    const defined = await send("PUT", "/v1/tools/lookup", O, LOOKUP);
    const record = await expectStatus(defined, 201);
    expect(record).toMatchObject({ name: "lookup" });
    expect(defined.headers.get("etag")).toBe(`"${String(record["version"])}"`);

    await expectStatus(await send("PUT", api, T, '{"selectedTools":["lookup"]}'), 201);
    const looked = await json<Accepted>(
      await send("POST", `${api}/conversations/root/inputs?wait=10`, T, '{"input":"/call lookup {\\"id\\":1}"}'),
    );
    expect(looked.status).toBe("done");
    expect(JSON.stringify(looked.answer)).toContain('\\"status\\":\\"shipped\\"');
    expect(endpoint.requests).toHaveLength(1);
    const first = endpoint.requests[0] as SeenRequest;
    expect(first.path).toBe("/lookup");
    expect(first.body).toMatchObject({ session: SESSION, name: "lookup", arguments: { id: 1 } });
    // {session}:{incarnation}:{taskId} (docs/tools.md "HTTP tools").
    expect(first.key).toMatch(new RegExp(`^${SESSION}:[0-9a-v]{10}:${first.body.taskId}$`));
    expect(first.webhookId).toBe(first.key);

    // 2. An approval, whose endpoint answers 202 and posts the result later.
    await expectStatus(await send("PUT", "/v1/tools/refund", O, REFUND), 201);
    await expectStatus(
      await send("PATCH", `${api}/conversations/root/config`, T, '{"selectedTools":["lookup","refund"]}'),
      200,
    );
    const refund = await json<Accepted>(
      await send("POST", `${api}/conversations/root/inputs`, T, '{"input":"/call refund {\\"id\\":1}"}'),
    );
    const [approval] = await until(
      async () => {
        const items = (await json<{ items: PendingItem[] }>(await send("GET", `${api}/pending`, T))).items;
        return items.length > 0 ? items : undefined;
      },
      "the approval in the pending list",
      1_000,
    );
    expect(approval).toMatchObject({
      id: expect.stringMatching(new RegExp(`^t${String(approval?.taskId)}-approval-[0-9a-v]{10}$`)),
      type: "approval",
      name: "refund",
      arguments: { id: 1 },
    });
    expect(endpoint.requests).toHaveLength(1);
    const approved = await expectStatus(
      await send("POST", `${api}/pending/${approval?.id ?? ""}`, T, '{"approve":true}'),
      200,
    );
    expect(approved).toMatchObject({ id: approval?.id, answer: { approve: true } });
    const again = await expectStatus(
      await send("POST", `${api}/pending/${approval?.id ?? ""}`, T, '{"approve":true}'),
      409,
    );
    expect(again).toMatchObject({ code: "already_answered" });
    const later = await until(
      async () => endpoint.requests.find((r) => r.path === "/later"),
      "the refund request",
      1_000,
    );
    expect(later.body).toMatchObject({ name: "refund", arguments: { id: 1 } });
    const posted = await endpoint.postResult(later, {
      output: { id: 1, status: "refund approved", by: "the product's backend" },
      isError: false,
    });
    expect(posted.status, await posted.clone().text()).toBe(200);
    expect(await answerText(refund.inputId)).toContain("refund approved");
    expect((await json<{ items: PendingItem[] }>(await send("GET", `${api}/pending`, T))).items).toEqual([]);

    // 3. A client tool, answered by the frontend.
    await expectStatus(await send("PUT", "/v1/tools/confirm", O, CONFIRM), 201);
    await expectStatus(
      await send("PATCH", `${api}/conversations/root/config`, T, '{"selectedTools":["lookup","refund","confirm"]}'),
      200,
    );
    const confirm = await json<Accepted>(
      await send(
        "POST",
        `${api}/conversations/root/inputs`,
        T,
        '{"input":"/call confirm {\\"question\\":\\"Refund order 1?\\"}"}',
      ),
    );
    const [client] = await until(
      async () => {
        const items = (await json<{ items: PendingItem[] }>(await send("GET", `${api}/conversations/root/pending`, T)))
          .items;
        return items.length > 0 ? items : undefined;
      },
      "the client tool in the pending list",
      1_000,
    );
    expect(client).toMatchObject({
      id: expect.stringMatching(new RegExp(`^t${String(client?.taskId)}-client-[0-9a-v]{10}$`)),
      type: "client_tool",
      name: "confirm",
      arguments: { question: "Refund order 1?" },
    });
    expect(client?.deadline).toBeGreaterThan(client?.createdAt ?? Infinity);
    await expectStatus(await send("POST", `${api}/pending/${client?.id ?? ""}`, T, '{"output":"yes, refund it"}'), 200);
    expect(await answerText(confirm.inputId)).toContain("yes, refund it");
    expect(endpoint.requests.map((r) => r.path)).toEqual(["/lookup", "/later"]);
    expect(endpoint.refused).toEqual([]);
  });
});
