/**
 * docs/api.md's route table is what a newcomer trusts: each row's Roles column is checked against what the route
 * answers each role's token (allowed: neither 401 nor 403; not allowed: 401 or 403), and every route the app
 * registers must have a row. The table is read from the doc itself, so a row that drifts from the code fails here.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import apiDoc from "../../docs/api.md?raw";
import { afterAll, describe, expect, it } from "vitest";
import { app, servedRoutes } from "../../src/worker/http/app.js";
import { call, token, uniqueSession } from "./http-fixtures.js";
import { ROUTES, TENANT_ROUTES, type RouteCase } from "./http-routes.js";
import { putUserTemplate, fromTemplate } from "./users-fixtures.js";

afterAll(async () => {
  await abortAllDurableObjects();
});

const ROLES = ["operator", "client", "mayor", "user", "agent"] as const;
type Role = (typeof ROLES)[number];

/** One route of a table row: its method and its path with every parameter written `{}`. */
interface TableRoute {
  readonly method: string;
  readonly path: string;
  /** The path as the row writes it (parameters named), for messages and for filling in. */
  readonly written: string;
  /** The roles the row grants; `none` rows take no bearer token (a signature instead). */
  readonly roles: ReadonlySet<Role> | "none";
}

const SESSION_PREFIX = "/v1/sessions/{session}";

/** A table cell split on `|` that is not escaped (`\|` stays inside the cell). */
function cells(line: string): string[] {
  return line
    .split(/(?<!\\)\|/)
    .slice(1, -1)
    .map((cell) => cell.trim());
}

/** `{name}` and Hono's `:name` (with or without a pattern) both become `{}`; the query is dropped. */
function normalize(path: string): string {
  return path
    .split("?")[0]!
    .split("/")
    .map((part) => (part.startsWith(":") || /\{[^}]*\}/.test(part) ? "{}" : part))
    .join("/");
}

/** The rows of the "Routes" table: every `METHOD /path` of the first column with the second column's roles. */
export function tableRoutes(markdown: string): TableRoute[] {
  const lines = markdown.split("\n");
  const header = lines.findIndex((line) => line.startsWith("| Method and path | Roles |"));
  if (header < 0) throw new Error("docs/api.md has no '| Method and path | Roles |' table");
  const out: TableRoute[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    const [what = "", who = ""] = cells(line);
    const roles: ReadonlySet<Role> | "none" = who.startsWith("none")
      ? "none"
      : new Set(ROLES.filter((role) => new RegExp(`\\b${role}\\b`).test(who)));
    // `GET`/`PATCH /path` shares the path; `POST /a`, `/b` shares the method.
    let methods: string[] = [];
    let last: string[] = [];
    for (const [, code = ""] of what.matchAll(/`([^`]+)`/g)) {
      const match = /^([A-Z]+)?(?:\s*(\/\S*))?$/.exec(code.trim());
      if (match === null || (match[1] === undefined && match[2] === undefined)) continue;
      if (match[1] !== undefined) methods.push(match[1]);
      const path = match[2];
      if (path === undefined) continue;
      if (methods.length === 0) methods = last;
      const bare = path.split("?")[0]!;
      // Paths under a session are written from the session on; `/health` is the Worker's own.
      const written = bare.startsWith("/v1") || bare === "/health" ? bare : `${SESSION_PREFIX}${bare}`;
      for (const method of methods) out.push({ method, path: normalize(written), written, roles });
      last = methods;
      methods = [];
    }
  }
  return out;
}

/** Bodies a route's own checks need before the rig narrows a role (the rig checks its role after the body). */
const BODIES: Readonly<Record<string, unknown>> = {
  "PUT /v1/sessions/{}/rig/agents/{}": { role: "polecat" },
  "PUT /v1/sessions/{}/rig/agents/{}/hook": { bead_id: "bead-1", title: "a bead" },
  "POST /v1/sessions/{}/rig/hook/activate": { attempt: 1 },
  "POST /v1/sessions/{}/rig/hook/touch": { attempt: 1 },
  "POST /v1/sessions/{}/rig/hook/complete": { attempt: 1 },
};

/** The request a row's route is tried with: the route table's case when there is one, else no body. */
function caseFor(route: TableRoute): RouteCase | undefined {
  return [...ROUTES, ...TENANT_ROUTES].find(
    (candidate) => candidate.method === route.method && normalize(candidate.path("{session}")) === route.path,
  );
}

/** The path with its parameters filled in for `session` (names no resource exists for: an allowed role gets 404). */
function concrete(route: TableRoute, session: string, tenant: string): string {
  const known = caseFor(route);
  if (known !== undefined) return known.path(session);
  return (
    route.written
      .replace("{session}", session)
      // A rig agent's own routes name its id (the agent tokens here act as agent-1).
      .replace(/\/rig\/agents\/\{id\}/, `/rig/agents/${AGENT}`)
      .replace("/hooks/{id}.json", `/hooks/${AGENT}.json`)
      .replace("{tenant}", tenant)
      .replace(/\{c\}/g, "root")
      .replace(/\{inputId\}|\{id\}|\{taskId\}/g, "3")
      .replace(/\{[^}]+\}/g, "lookup")
  );
}

/** What a row's request carries: the route case's body, a body the route's checks need, or `{}` (none for GET/DELETE). */
function bodyOf(row: TableRoute, known: RouteCase | undefined): { body?: unknown } {
  if (known?.body !== undefined) return { body: known.body };
  const needed = BODIES[`${row.method} ${row.path}`];
  if (needed !== undefined) return { body: needed };
  return row.method === "GET" || row.method === "DELETE" ? {} : { body: {} };
}

/** Routes that end or change the session for every later request: each gets a session of its own. */
function destructive(route: TableRoute): boolean {
  return (
    (route.method === "DELETE" && route.path === normalize(SESSION_PREFIX)) ||
    route.path.endsWith("/shutdown") ||
    route.path.endsWith("/import") ||
    route.path.endsWith("/erase") ||
    route.path.endsWith("/revoke")
  );
}

const TENANT = "role-table";
const USER = "table-user";
/** The agent id of http-fixtures' agent tokens. */
const AGENT = "agent-1";

/** A session the role may reach when the table grants it: users own theirs, agents name theirs in the token. */
async function sessionFor(role: Role): Promise<string> {
  const session = uniqueSession(`table-${role}`);
  const creator = role === "user" ? await token(TENANT, "user", { sub: USER }) : await token(TENANT, "operator");
  const created = await call("PUT", `/v1/sessions/${session}`, {
    token: creator,
    body: role === "user" ? fromTemplate() : { model: "echo" },
  });
  if (created.status !== 201) throw new Error(`create ${session}: ${created.status} ${await created.text()}`);
  return session;
}

async function tokenFor(role: Role, session: string): Promise<string> {
  switch (role) {
    case "operator":
    case "client":
    case "mayor":
      return token(TENANT, role);
    case "user":
      return token(TENANT, "user", { sub: USER });
    case "agent":
      return token(TENANT, "agent", { sessions: [session] });
  }
}

describe("docs/api.md's role table", () => {
  it("The role table in docs/api.md matches every route's answers", async () => {
    const rows = tableRoutes(apiDoc);
    expect(rows.length).toBeGreaterThan(50);

    // Every route the app registers has a row (a route added without one fails here).
    const listed = new Set(rows.map((row) => `${row.method} ${row.path}`));
    const unlisted = servedRoutes(app)
      .map((route) => `${route.method} ${normalize(route.path)}`)
      .filter((route) => route !== "GET /v1/openapi.json" && !listed.has(route));
    expect(unlisted, "routes the app serves that docs/api.md's table does not list").toEqual([]);
    // And every row names a route the app serves.
    const served = new Set(servedRoutes(app).map((route) => `${route.method} ${normalize(route.path)}`));
    expect(
      rows.filter((row) => !served.has(`${row.method} ${row.path}`)).map((row) => `${row.method} ${row.written}`),
      "rows of docs/api.md's table that name no route",
    ).toEqual([]);

    await putUserTemplate(TENANT);
    const mismatches: string[] = [];
    for (const role of ROLES) {
      let shared = await sessionFor(role);
      for (const row of rows) {
        if (row.roles === "none") continue;
        const session = destructive(row) ? await sessionFor(role) : shared;
        const known = caseFor(row);
        const response = await call(row.method, concrete(row, session, TENANT), {
          token: await tokenFor(role, session),
          ...bodyOf(row, known),
          ...(known?.headers === undefined ? {} : { headers: known.headers }),
        });
        // A success may be a stream that never ends (a watch, a chat turn): only problem bodies are read.
        const detail = response.status >= 400 ? await response.text() : "";
        if (response.status < 400) await response.body?.cancel();
        const refused = response.status === 401 || response.status === 403;
        const granted = row.roles.has(role);
        if (granted === refused)
          mismatches.push(
            `${row.method} ${row.written}: ${role} ${granted ? "is listed but got" : "is not listed but got"} ${response.status} ${detail.slice(0, 160)}`,
          );
        // A route that removed or closed the shared session would spoil every later row.
        if (destructive(row) && session === shared) shared = await sessionFor(role);
      }
    }
    expect(mismatches).toEqual([]);
  }, 240_000);
});

describe("a session's 404", () => {
  it("is the same for an unknown session and another user's, and names no method to call", async () => {
    await putUserTemplate(TENANT);
    const owner = await token(TENANT, "user", { sub: "owner-of-it" });
    const theirs = uniqueSession("theirs");
    const created = await call("PUT", `/v1/sessions/${theirs}`, { token: owner, body: fromTemplate() });
    expect(created.status).toBe(201);
    const stranger = await token(TENANT, "user", { sub: "stranger" });
    for (const [method, suffix] of [
      ["GET", ""],
      ["GET", "/conversations/root/entries"],
      ["POST", "/conversations/root/inputs"],
      ["GET", "/tasks"],
    ] as const) {
      const answers = [];
      for (const session of [theirs, uniqueSession("nobody")]) {
        const response = await call(method, `/v1/sessions/${session}${suffix}`, {
          token: stranger,
          ...(method === "POST" ? { body: { input: "hi" }, headers: { "idempotency-key": "k" } } : {}),
        });
        // `instance` is the request's path, the one part that differs.
        const { instance: _path, ...body } = (await response.json()) as Record<string, unknown>;
        answers.push({ status: response.status, body });
      }
      expect(answers[0], `${method} ${suffix}`).toEqual(answers[1]);
      expect(answers[0]?.status).toBe(404);
      expect(JSON.stringify(answers[0]?.body)).not.toMatch(/\b(PUT|POST|create)\b/);
    }
  });
});
