/**
 * Session templates over HTTP (docs/users.md "Templates"): the operator's CRUD with its validation
 * (422 invalid_template naming the field, nothing written), ETag and If-Match; and what a template
 * fixes for end users: a user token creates sessions only from a template, may set and PATCH only the
 * fields it marks user-settable (403 naming the field), and never changes the model, tools, profile or
 * thinking otherwise, while operators and clients keep their freedom.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, exists, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";
import { registerMcpServer } from "./mcp-call-fixtures.js";
import { McpTestServer, mcpFetch } from "./mcp-fixtures.js";
import { resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const SUPPORT = {
  model: "echo/echo",
  selectedTools: ["echo"],
  profile: "support-agent",
  thinking: "low",
  userSettable: ["title", "labels", "budgetMs"],
} as const;

/** The operator's token for `tenant`, with the profiles the tests name defined (a session or template may name only those). */
async function operator(tenant: string): Promise<string> {
  const op = await token(tenant, "operator");
  for (const profile of ["support-agent", "pirate"]) {
    const response = await call("PUT", `/v1/profiles/${profile}`, {
      token: op,
      body: { sections: [{ id: "role", text: `You are ${profile}.` }] },
    });
    expect(response.status).toBe(201);
  }
  return op;
}

async function user(tenant: string, sub: string): Promise<string> {
  return token(tenant, "user", { sub });
}

describe("templates: the operator's routes", () => {
  it("a PUT that is not a valid template is 422 invalid_template naming the field, and writes nothing", async () => {
    const tenant = uniqueSession("tpl-invalid");
    const op = await operator(tenant);
    const cases: [string, unknown, string][] = [
      ["bad_name", { model: "echo/echo" }, "name"],
      ["a".repeat(33), { model: "echo/echo" }, "name"],
      ["ok", { model: 5 }, "model"],
      ["ok", { thinking: "enormous" }, "thinking"],
      ["ok", { selectedTools: "echo" }, "selectedTools"],
      ["ok", { profile: "" }, "profile"],
      ["ok", { userSettable: ["owner"] }, "userSettable.0"],
      ["ok", { userSettable: ["title", "title"] }, "userSettable"],
      ["ok", { template: "other" }, "template"],
      ["ok", { unknownField: 1 }, "unknownField"],
    ];
    for (const [name, body, field] of cases) {
      const response = await call("PUT", `/v1/templates/${name}`, { token: op, body });
      const problem = await json(response);
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(problem["code"]).toBe("invalid_template");
      expect(problem["field"], JSON.stringify(body)).toBe(field);
    }
    const list = await call("GET", "/v1/templates", { token: op });
    expect(await json(list)).toEqual({ items: [] });
    // Not JSON at all is the body's problem, not the template's.
    const raw = await call("PUT", "/v1/templates/ok", {
      token: op,
      rawBody: "{",
      headers: { "content-type": "application/json" },
    });
    expect(raw.status).toBe(400);
    expect((await json(raw))["code"]).toBe("invalid_json");
  });

  it("PUT, GET, list and DELETE a template, with ETag and If-Match; an unknown one is 404 template_not_found", async () => {
    const tenant = uniqueSession("tpl-crud");
    const op = await operator(tenant);
    const created = await call("PUT", "/v1/templates/support", { token: op, body: SUPPORT });
    expect(created.status).toBe(201);
    const record = await json(created);
    expect(record).toMatchObject({ name: "support", ...SUPPORT, userSettable: [...SUPPORT.userSettable] });
    const etag = created.headers.get("etag");
    expect(etag).toBe(`"${String(record["version"])}"`);

    const replaced = await call("PUT", "/v1/templates/support", {
      token: op,
      body: { ...SUPPORT, thinking: "high" },
      headers: { "if-match": etag ?? "" },
    });
    expect(replaced.status).toBe(200);
    const current = replaced.headers.get("etag") ?? "";
    expect(current).not.toBe(etag);
    const stale = await call("PUT", "/v1/templates/support", {
      token: op,
      body: SUPPORT,
      headers: { "if-match": etag ?? "" },
    });
    expect(stale.status).toBe(412);
    expect((await json(stale))["code"]).toBe("precondition_failed");
    const absent = await call("PUT", "/v1/templates/nobody", {
      token: op,
      body: SUPPORT,
      headers: { "if-match": "*" },
    });
    expect(absent.status).toBe(412);

    const got = await call("GET", "/v1/templates/support", { token: op });
    expect(got.status).toBe(200);
    expect(got.headers.get("etag")).toBe(current);
    expect((await json(got))["thinking"]).toBe("high");
    await call("PUT", "/v1/templates/minimal", { token: op, body: {} });
    const list = await json<{ items: { name: string; userSettable: string[] }[] }>(
      await call("GET", "/v1/templates", { token: op }),
    );
    expect(list.items.map((t) => t.name)).toEqual(["minimal", "support"]);
    expect(list.items[0]?.userSettable).toEqual([]);

    expect(
      (await call("DELETE", "/v1/templates/support", { token: op, headers: { "if-match": etag ?? "" } })).status,
    ).toBe(412);
    const deleted = await call("DELETE", "/v1/templates/support", { token: op, headers: { "if-match": current } });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ name: "support", deleted: true });
    for (const [method, path] of [
      ["GET", "/v1/templates/support"],
      ["DELETE", "/v1/templates/support"],
      ["GET", "/v1/templates/not_a_name!"],
    ] as const) {
      const response = await call(method, path, { token: op });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect((await json(response))["code"]).toBe("template_not_found");
    }
    // A session from a template that does not exist: 404 template_not_found, nothing created.
    const name = uniqueSession("from-nothing");
    const refused = await call("PUT", `/v1/sessions/${name}`, {
      token: await user(tenant, "alice"),
      body: { template: "support" },
    });
    expect(refused.status).toBe(404);
    expect((await json(refused))["code"]).toBe("template_not_found");
    expect(await exists(tenant, name)).toBe(false);
  });
});

describe("templates: the tools they name", () => {
  it("A template naming an unknown tool is refused when it is put", async () => {
    const tenant = uniqueSession("tpl-tools");
    const op = await operator(tenant);
    const put = (name: string, selectedTools: readonly string[]): Promise<Response> =>
      call("PUT", `/v1/templates/${name}`, {
        token: op,
        body: { model: "echo/echo", selectedTools, userSettable: ["title"] },
      });

    // Neither built in nor in the catalog: 422 naming the field, and no template is written.
    for (const [tools, field] of [
      [["lookup_order"], "selectedTools.0"],
      [["echo", "lookup_order"], "selectedTools.1"],
      [["nowhere__lookup"], "selectedTools.0"],
    ] as const) {
      const refused = await put("orders", tools);
      const problem = await json(refused);
      expect(refused.status, JSON.stringify(tools)).toBe(422);
      expect(problem).toMatchObject({ code: "invalid_template", field });
      expect(String(problem["detail"])).toContain(tools[tools.length - 1] ?? "");
    }
    expect(await json(await call("GET", "/v1/templates", { token: op }))).toEqual({ items: [] });

    // Built-in tools, a catalog tool and a registered MCP server's pinned tool are accepted.
    const tool = await call("PUT", "/v1/tools/lookup_order", {
      token: op,
      body: { description: "Look up an order", parameters: { type: "object" }, handler: { type: "client" } },
    });
    expect(tool.status, await tool.clone().text()).toBe(201);
    const server = new McpTestServer("shop", [{ name: "lookup", inputSchema: { type: "object" } }]);
    setHostSeams({ fetch: mcpFetch(server) });
    await registerMcpServer(tenant, server);
    const stored = await put("orders", ["echo", "lookup_order", "shop__lookup"]);
    expect(stored.status, await stored.clone().text()).toBe(201);
    // A tool of a registered server that its pinned list does not have is unknown too.
    const missing = await put("orders", ["shop__refund"]);
    expect(missing.status).toBe(422);
    expect(await json(missing)).toMatchObject({ code: "invalid_template", field: "selectedTools.0" });

    // A tool deleted after the template was put leaves its tombstone: the template stays valid and
    // users still create sessions from it (the call would settle tool_removed).
    expect((await call("DELETE", "/v1/tools/lookup_order", { token: op })).status).toBe(200);
    const session = uniqueSession("tpl-tools-user");
    const created = await call("PUT", `/v1/sessions/${session}`, {
      token: await user(tenant, "ann"),
      body: { template: "orders" },
    });
    expect(created.status, await created.clone().text()).toBe(201);
    // A template put now naming the deleted tool is refused: nothing can call it.
    const late = await put("late", ["lookup_order"]);
    expect(late.status).toBe(422);
    expect(String((await json(late))["detail"])).toContain("deleted");
  });
});

describe("templates: what users may set", () => {
  it("A user cannot change the model, tools or prompt", async () => {
    const tenant = uniqueSession("tpl-user");
    const op = await operator(tenant);
    expect((await call("PUT", "/v1/templates/support", { token: op, body: SUPPORT })).status).toBe(201);
    const alice = await user(tenant, "alice");

    // Without a template a user creates nothing (422 naming template); with one, only its user-settable fields.
    const name = uniqueSession("users-session");
    const bare = await call("PUT", `/v1/sessions/${name}`, { token: alice, body: { title: "mine" } });
    expect(bare.status).toBe(422);
    expect(await json(bare)).toMatchObject({ code: "invalid_template", field: "template" });
    for (const [field, value] of [
      ["model", "echo/echo-slow"],
      ["selectedTools", []],
      ["profile", "pirate"],
      ["thinking", "max"],
      ["onInterrupt", "fail"],
    ] as const) {
      const response = await call("PUT", `/v1/sessions/${name}`, {
        token: alice,
        body: { template: "support", [field]: value },
      });
      expect(response.status, field).toBe(403);
      expect(await json(response), field).toMatchObject({ code: "forbidden", field });
    }
    expect(await exists(tenant, name)).toBe(false);

    const created = await call("PUT", `/v1/sessions/${name}`, {
      token: alice,
      body: { template: "support", title: "mine", budgetMs: 60_000 },
    });
    expect(created.status).toBe(201);
    expect((await json<{ config: Record<string, unknown> }>(created)).config).toMatchObject({
      model: "echo/echo",
      selectedTools: ["echo"],
      profile: "support-agent",
      thinking: "low",
      budgetMs: 60_000,
    });

    // The operator later lets users pick the model: sessions keep what their template said when created.
    expect(
      (
        await call("PUT", "/v1/templates/support", {
          token: op,
          body: { ...SUPPORT, userSettable: [...SUPPORT.userSettable, "model", "selectedTools"] },
        })
      ).status,
    ).toBe(200);

    const config = `/v1/sessions/${name}/conversations/root/config`;
    const before = await json(await call("GET", config, { token: alice }));
    const seq = await lastSeq(tenant, name);
    for (const [field, value] of [
      ["model", "echo/echo-slow"],
      ["selectedTools", []],
      ["profile", "pirate"],
      ["thinking", "max"],
    ] as const) {
      const response = await call("PATCH", config, { token: alice, body: { [field]: value } });
      expect(response.status, field).toBe(403);
      expect(await json(response), field).toMatchObject({ code: "forbidden", field });
      // One allowed field does not carry a forbidden one.
      const mixed = await call("PATCH", config, { token: alice, body: { budgetMs: 5_000, [field]: value } });
      expect(mixed.status, field).toBe(403);
    }
    expect(await json(await call("GET", config, { token: alice }))).toEqual(before);
    expect(await lastSeq(tenant, name)).toBe(seq);

    // What the template marks user-settable, a user may PATCH: budgetMs, and the title.
    const budget = await call("PATCH", config, { token: alice, body: { budgetMs: 5_000 } });
    expect(budget.status).toBe(200);
    expect((await json(budget))["budgetMs"]).toBe(5_000);
    expect((await call("PATCH", `/v1/sessions/${name}`, { token: alice, body: { title: "renamed" } })).status).toBe(
      200,
    );

    // Operators keep today's behaviour on the same session.
    const byOperator = await call("PATCH", config, { token: op, body: { model: "echo/echo-slow" } });
    expect(byOperator.status).toBe(200);
    expect((await json(byOperator))["model"]).toBe("echo/echo-slow");

    // A session created without a template lets a user set nothing, even one a grant lets reach it.
    const plain = uniqueSession("plain");
    expect(
      (await call("PUT", `/v1/sessions/${plain}`, { token: await token(tenant, "client"), body: {} })).status,
    ).toBe(201);
    const granted = await token(tenant, "user", { sub: "alice", sessions: [plain] });
    expect((await call("GET", `/v1/sessions/${plain}`, { token: granted })).status).toBe(200);
    const noTemplate = await call("PATCH", `/v1/sessions/${plain}/conversations/root/config`, {
      token: granted,
      body: { budgetMs: 5_000 },
    });
    expect(noTemplate.status).toBe(403);
    expect(await json(noTemplate)).toMatchObject({ code: "forbidden", field: "budgetMs" });
    const retitled = await call("PATCH", `/v1/sessions/${plain}`, { token: granted, body: { title: "mine now" } });
    expect(retitled.status).toBe(403);
    expect(await json(retitled)).toMatchObject({ code: "forbidden", field: "title" });
  });

  it("operators and clients may start from a template and override any field", async () => {
    const tenant = uniqueSession("tpl-client");
    const op = await operator(tenant);
    await call("PUT", "/v1/templates/support", { token: op, body: SUPPORT });
    const name = uniqueSession("client-session");
    const response = await call("PUT", `/v1/sessions/${name}`, {
      token: await token(tenant, "client"),
      body: { template: "support", model: "echo/echo-slow" },
    });
    expect(response.status).toBe(201);
    expect((await json<{ config: Record<string, unknown> }>(response)).config).toMatchObject({
      model: "echo/echo-slow",
      profile: "support-agent",
      thinking: "low",
    });
  });
});
