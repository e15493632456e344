/**
 * The floor of `npm run bench:load` (scripts/bench-load.ts, docs/performance.md "Per-input cost against a
 * floor"): the least a Worker with pico-edge's libraries does to accept an input and answer it. A benchmark
 * fixture, run only by `wrangler dev -c bench/floor/wrangler.jsonc`; nothing in src/ imports it.
 *
 * The same libraries and the same wire shape as pico-edge's accept route, so one load driver drives both:
 * Hono routes, an HS256 JWT (`hono/jwt`) with `tenant` and `role` (a `user` token also `sub`, and only its own
 * sessions), zod at the wire, one SQLite-backed Durable Object per session named `${tenant}:${session}`.
 *
 *   PUT  /v1/sessions/{session}                                  201 created, 200 already there
 *   POST /v1/sessions/{session}/conversations/root/inputs?wait=N  `{ input }`, `Idempotency-Key`: stores the
 *        input and an echo answer in one transaction, 201 `{ inputId, status: "done", duplicate: false, ... }`;
 *        the same key and body again answer 200 with the original (`duplicate: true`), another body 422.
 *        The answer is written with the input, so `wait` never waits.
 *   GET  /v1/sessions/{session}/inputs                           every input with its answers (the driver's check)
 *
 * With the variable FLOOR_ROUTER=bare the same routes are served by a bare `fetch` (no Hono) doing the same work:
 * the same checks, schemas, token verification and object calls, the same answers. bench:load's `bare` run measures
 * it, so the difference between `floor` and `bare` is what Hono's routing, context and middleware cost per input.
 */
import { DurableObject } from "cloudflare:workers";
import { Hono } from "hono";
import { verify } from "hono/jwt";
import { z } from "zod";

interface Env {
  readonly SESSIONS: DurableObjectNamespace<FloorSession>;
  readonly JWT_SECRET: string;
  /** "bare": the routes without Hono (`bare` below), for bench:load's `bare` run. */
  readonly FLOOR_ROUTER?: string;
}

const claimsSchema = z.object({
  tenant: z.string().min(1).max(64),
  role: z.enum(["client", "operator", "user"]),
  sub: z.string().min(1).max(128).optional(),
  exp: z.number().int(),
});
type Claims = z.infer<typeof claimsSchema>;

const sessionName = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/);
const acceptBody = z.strictObject({ input: z.string().min(1).max(1_000_000) });
const acceptQuery = z.strictObject({ wait: z.coerce.number().int().min(0).max(60).optional() });
const requestKey = z.string().min(1).max(255);

/** What the accept route answers: the fields of pico-edge's AcceptResponse the load driver reads. */
export interface FloorAccept {
  readonly inputId: number;
  readonly conversationId: number;
  readonly status: "done";
  readonly duplicate: boolean;
  readonly result: { readonly status: "done" };
  readonly outputText: string;
}

type Outcome =
  | { readonly ok: true; readonly value: FloorAccept }
  | { readonly ok: false; readonly status: 403 | 404 | 422; readonly code: string };

class Problem extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 422,
    readonly code: string,
    readonly field?: string,
  ) {
    super(code);
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown, field: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Problem(400, "invalid_request", field);
  return parsed.data;
}

/** One session: its owner, and its inputs with their answers, each pair written in one transaction. */
export class FloorSession extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** Undefined: not created; null: no owner (an operator's or client's session). */
  private owner: string | null | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS session (id INTEGER PRIMARY KEY CHECK (id = 1), owner TEXT);
      CREATE TABLE IF NOT EXISTS inputs (id INTEGER PRIMARY KEY, key TEXT UNIQUE, hash TEXT NOT NULL,
        text TEXT NOT NULL, at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS answers (id INTEGER PRIMARY KEY, input_id INTEGER NOT NULL, text TEXT NOT NULL,
        at INTEGER NOT NULL)`);
    const row = this.sql.exec<{ owner: string | null }>("SELECT owner FROM session").toArray()[0];
    this.owner = row === undefined ? undefined : row.owner;
  }

  create(owner: string | null): "created" | "exists" | "conflict" {
    if (this.owner !== undefined) return this.owner === owner ? "exists" : "conflict";
    this.sql.exec("INSERT INTO session (id, owner) VALUES (1, ?)", owner);
    this.owner = owner;
    return "created";
  }

  accept(user: string | null, key: string | null, hash: string, text: string): Outcome {
    if (this.owner === undefined) return { ok: false, status: 404, code: "session_not_found" };
    if (user !== null && this.owner !== user) return { ok: false, status: 403, code: "forbidden" };
    if (key !== null) {
      const found = this.sql
        .exec<{
          id: number;
          hash: string;
          answer: string;
        }>(
          "SELECT inputs.id, inputs.hash, answers.text AS answer FROM inputs JOIN answers ON answers.input_id = inputs.id WHERE inputs.key = ?",
          key,
        )
        .toArray()[0];
      if (found !== undefined) {
        if (found.hash !== hash) return { ok: false, status: 422, code: "idempotency_key_reused" };
        return { ok: true, value: accepted(found.id, true, found.answer) };
      }
    }
    const answer = `echo: ${text}`;
    const at = Date.now();
    const id = this.ctx.storage.transactionSync(() => {
      const { id } = this.sql
        .exec<{ id: number }>(
          "INSERT INTO inputs (key, hash, text, at) VALUES (?, ?, ?, ?) RETURNING id",
          key,
          hash,
          text,
          at,
        )
        .one();
      this.sql.exec("INSERT INTO answers (input_id, text, at) VALUES (?, ?, ?)", id, answer, at);
      return id;
    });
    return { ok: true, value: accepted(id, false, answer) };
  }

  inputs(): { key: string | null; text: string; answers: number }[] {
    return this.sql
      .exec<{ key: string | null; text: string; answers: number }>(
        "SELECT key, text, (SELECT count(*) FROM answers WHERE input_id = inputs.id) AS answers FROM inputs ORDER BY id",
      )
      .toArray();
  }
}

function accepted(inputId: number, duplicate: boolean, outputText: string): FloorAccept {
  return { inputId, conversationId: 1, status: "done", duplicate, result: { status: "done" }, outputText };
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

type App = { Bindings: Env; Variables: { claims: Claims } };
const app = new Hono<App>();

app.onError((error, c) => {
  const problem = error instanceof Problem ? error : new Problem(400, "invalid_request");
  if (!(error instanceof Problem) && !(error instanceof SyntaxError)) throw error;
  return c.json(
    { type: "about:blank", status: problem.status, code: problem.code, field: problem.field },
    problem.status,
    { "content-type": "application/problem+json" },
  );
});

app.get("/health", (c) => c.json({ ok: true }));

app.use("/v1/*", async (c, next) => {
  const header = c.req.header("authorization");
  if (header === undefined || !header.startsWith("Bearer ")) throw new Problem(401, "unauthorized", "authorization");
  let payload: unknown;
  try {
    payload = await verify(header.slice("Bearer ".length), c.env.JWT_SECRET, "HS256");
  } catch {
    throw new Problem(401, "unauthorized", "authorization");
  }
  const claims = parse(claimsSchema, payload, "authorization");
  if (claims.role === "user" && claims.sub === undefined) throw new Problem(401, "unauthorized", "authorization");
  c.set("claims", claims);
  await next();
});

function stub(c: { env: Env; get(key: "claims"): Claims }, session: string): DurableObjectStub<FloorSession> {
  return c.env.SESSIONS.get(c.env.SESSIONS.idFromName(`${c.get("claims").tenant}:${session}`));
}

app.put("/v1/sessions/:session", async (c) => {
  const session = parse(sessionName, c.req.param("session"), "session");
  const claims = c.get("claims");
  const created = await stub(c, session).create(claims.role === "user" ? (claims.sub ?? null) : null);
  if (created === "conflict") throw new Problem(403, "forbidden", "session");
  return c.json({ session }, created === "created" ? 201 : 200);
});

app.post("/v1/sessions/:session/conversations/:conversation/inputs", async (c) => {
  const session = parse(sessionName, c.req.param("session"), "session");
  if (c.req.param("conversation") !== "root") throw new Problem(404, "conversation_not_found", "conversation");
  parse(acceptQuery, c.req.query(), "query");
  const header = c.req.header("idempotency-key");
  const key = header === undefined ? null : parse(requestKey, header, "idempotency-key");
  const body = parse(acceptBody, await c.req.json(), "body");
  const claims = c.get("claims");
  const outcome = await stub(c, session).accept(
    claims.role === "user" ? (claims.sub ?? null) : null,
    key,
    await sha256(JSON.stringify(body)),
    body.input,
  );
  if (!outcome.ok) throw new Problem(outcome.status, outcome.code);
  return c.json(outcome.value, outcome.value.duplicate ? 200 : 201);
});

app.get("/v1/sessions/:session/inputs", async (c) => {
  const session = parse(sessionName, c.req.param("session"), "session");
  return c.json({ items: await stub(c, session).inputs() });
});

/** The claims of a request's bearer token (the `/v1/*` middleware above, without Hono). */
async function claimsOf(request: Request, env: Env): Promise<Claims> {
  const header = request.headers.get("authorization");
  if (header === null || !header.startsWith("Bearer ")) throw new Problem(401, "unauthorized", "authorization");
  let payload: unknown;
  try {
    payload = await verify(header.slice("Bearer ".length), env.JWT_SECRET, "HS256");
  } catch {
    throw new Problem(401, "unauthorized", "authorization");
  }
  const claims = parse(claimsSchema, payload, "authorization");
  if (claims.role === "user" && claims.sub === undefined) throw new Problem(401, "unauthorized", "authorization");
  return claims;
}

function json(value: unknown, status: number, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

function bareStub(env: Env, claims: Claims, session: string): DurableObjectStub<FloorSession> {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${claims.tenant}:${session}`));
}

/** The routes above as one bare `fetch`: the same work, routed by hand. */
async function bareRoutes(request: Request, env: Env): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname;
  if (path === "/health" && request.method === "GET") return json({ ok: true }, 200);
  if (!path.startsWith("/v1/")) return json({ message: "Not Found" }, 404);
  const claims = await claimsOf(request, env);
  const parts = path.split("/");
  // ["", "v1", "sessions", session, ...]
  if (parts[2] !== "sessions" || parts[3] === undefined) return json({ message: "Not Found" }, 404);
  const session = parse(sessionName, decodeURIComponent(parts[3]), "session");
  if (parts.length === 4 && request.method === "PUT") {
    const created = await bareStub(env, claims, session).create(claims.role === "user" ? (claims.sub ?? null) : null);
    if (created === "conflict") throw new Problem(403, "forbidden", "session");
    return json({ session }, created === "created" ? 201 : 200);
  }
  if (parts.length === 5 && parts[4] === "inputs" && request.method === "GET")
    return json({ items: await bareStub(env, claims, session).inputs() }, 200);
  if (parts.length === 7 && parts[4] === "conversations" && parts[6] === "inputs" && request.method === "POST") {
    if (parts[5] !== "root") throw new Problem(404, "conversation_not_found", "conversation");
    parse(acceptQuery, Object.fromEntries(url.searchParams), "query");
    const header = request.headers.get("idempotency-key");
    const key = header === null ? null : parse(requestKey, header, "idempotency-key");
    const body = parse(acceptBody, await request.json(), "body");
    const outcome = await bareStub(env, claims, session).accept(
      claims.role === "user" ? (claims.sub ?? null) : null,
      key,
      await sha256(JSON.stringify(body)),
      body.input,
    );
    if (!outcome.ok) throw new Problem(outcome.status, outcome.code);
    return json(outcome.value, outcome.value.duplicate ? 200 : 201);
  }
  return json({ message: "Not Found" }, 404);
}

async function bare(request: Request, env: Env): Promise<Response> {
  try {
    return await bareRoutes(request, env);
  } catch (error) {
    if (!(error instanceof Problem) && !(error instanceof SyntaxError)) throw error;
    const problem = error instanceof Problem ? error : new Problem(400, "invalid_request");
    return json(
      { type: "about:blank", status: problem.status, code: problem.code, field: problem.field },
      problem.status,
      {
        "content-type": "application/problem+json",
      },
    );
  }
}

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response> {
    return env.FLOOR_ROUTER === "bare" ? bare(request, env) : app.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
