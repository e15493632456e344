/**
 * Watch routes (§9.4; docs/api.md "Watch"): `GET .../conversations/{conversation}/watch` and
 * `GET /v1/sessions/{session}/watch`, as Server-Sent Events or, with `Upgrade: websocket`, a
 * hibernatable WebSocket; and `POST .../watch-token`, which issues the short-lived watch token that
 * `?access_token=` accepts (EventSource and WebSocket cannot set headers; a normal bearer token in a URL
 * is refused, see identity/auth.ts); the resume position is `Last-Event-ID` (or `?lastEventId=` for WebSocket clients).
 * After
 * auth and validation the request is forwarded to the session object, which streams.
 */
import { Hono } from "hono";
import { sign } from "hono/jwt";
import { jwtSecret, maxTokenLifetime, requires, watchTokenLifetime, type AppEnv } from "../../identity/auth.js";
import { eventId, noQuery, parse, sessionName, watchQuery, watchTokenBody, type WatchScope } from "../../schemas.js";
import { body, conversationParam, query, run, session, type AppContext } from "./shared.js";
import { directoryStub } from "../../directory/object.js";
import { Problem } from "../../problems.js";
import { isRevoked, noteRevocation } from "../../identity/revocation.js";
import { WATCHER_HEADER, type Watcher } from "../../watch/guard.js";

export const watchRoutes = new Hono<AppEnv>();

/**
 * Issue a watch token for one watch: the caller's tenant and role, `scope: "watch"`, the watch it opens,
 * and a lifetime of `ttlSeconds` (default WATCH_TOKEN_LIFETIME_SECONDS), never past the caller's own
 * token or the maximum lifetime.
 */
async function issueWatchToken(c: AppContext, scope: WatchScope): Promise<Response> {
  query(c, noQuery);
  const options = await body(c, watchTokenBody, { optional: true });
  const claims = c.get("claims");
  const now = Math.floor(Date.now() / 1000);
  const ttl = Math.max(
    1,
    Math.min(options.ttlSeconds ?? watchTokenLifetime(c.env), maxTokenLifetime(c.env), claims.exp - now),
  );
  const exp = now + ttl;
  const token = await sign(
    {
      tenant: claims.tenant,
      role: claims.role,
      ...(claims.agent === undefined ? {} : { agent: claims.agent }),
      // A user's watch token is that user's: it opens the watch only while the session is theirs
      // (identity/user-access.ts).
      ...(claims.role === "user"
        ? {
            sub: claims.sub,
            ...(claims.act === undefined ? {} : { act: claims.act }),
            ...(claims.sessions === undefined ? {} : { sessions: claims.sessions }),
          }
        : {}),
      scope: "watch",
      watch: scope,
      iat: now,
      exp,
    },
    jwtSecret(c.env),
    "HS256",
  );
  return c.json({ token, expiresAt: new Date(exp * 1000).toISOString(), expiresIn: ttl }, 201);
}

// The session (and conversation) must exist: another tenant's session is 404 here as everywhere.
watchRoutes.post("/:session/watch-token", requires("watch"), async (c) => {
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  await run(session(c).op("lastSeq"));
  return issueWatchToken(c, { session: name });
});

// The token names the conversation by id (and marks the root), so it opens the stream whether the path
// says `root` or the id (identity/auth.ts compares them).
watchRoutes.post("/:session/conversations/:conversation/watch-token", requires("watch"), async (c) => {
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const ref = conversationParam(c);
  const stub = session(c);
  const { conversation } = await run(stub.op("snapshot", ref));
  const { rootConversationId } = await run(stub.op("summary"));
  return issueWatchToken(c, {
    session: name,
    conversation: String(conversation.id),
    ...(conversation.id === rootConversationId ? { root: true as const } : {}),
  });
});

/**
 * A user's watch closes at its token's expiry and on revocation (watch/guard.ts): the directory records
 * that this session may hold the user's watch until then (so a revocation reaches it) and answers the
 * user's revocation time, which refuses a token the isolate's cache still let through.
 */
export async function userWatcher(c: AppContext): Promise<Watcher | undefined> {
  const claims = c.get("claims");
  if (claims.role !== "user" || claims.sub === undefined) return undefined;
  const now = Math.floor(Date.now() / 1000);
  const revoked = await directoryStub(c.env, claims.tenant).userWatching(
    claims.sub,
    parse(sessionName, c.req.param("session"), "invalid_id", "session"),
    claims.exp,
    now,
  );
  if (revoked !== undefined) noteRevocation(claims.tenant, claims.sub, revoked);
  if (isRevoked(claims.iat, revoked))
    throw new Problem("unauthorized", `the tokens of user ${claims.sub} were revoked; get a new token`, "token.iat");
  return { sub: claims.sub, exp: claims.exp, ...(claims.iat === undefined ? {} : { iat: claims.iat }) };
}

async function forward(c: AppContext, target: string): Promise<Response> {
  const stub = session(c);
  const q = query(c, watchQuery);
  const header = c.req.header("last-event-id");
  const lastEventId =
    header !== undefined
      ? parse(eventId, header, "invalid_cursor", "last-event-id")
      : q.lastEventId !== undefined
        ? parse(eventId, q.lastEventId, "invalid_cursor", "lastEventId")
        : undefined;
  const headers = new Headers();
  if (lastEventId !== undefined) headers.set("last-event-id", lastEventId);
  const upgrade = c.req.header("upgrade");
  if (upgrade !== undefined) headers.set("upgrade", upgrade);
  const watcher = await userWatcher(c);
  if (watcher !== undefined) headers.set(WATCHER_HEADER, JSON.stringify(watcher));
  return stub.fetch(new Request(`https://session.internal/watch/${target}`, { headers, signal: c.req.raw.signal }));
}

watchRoutes.get("/:session/watch", requires("watch", { watch: true }), (c) => forward(c, "session"));

watchRoutes.get("/:session/conversations/:conversation/watch", requires("watch", { watch: true }), async (c) => {
  const ref = conversationParam(c);
  return forward(c, ref === "root" ? "root" : String(ref));
});
