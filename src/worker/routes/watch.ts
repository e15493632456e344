/**
 * Watch routes (DESIGN §6, §9.4): `GET .../conversations/{conversation}/watch` and
 * `GET /v1/sessions/{session}/watch`, as Server-Sent Events or, with `Upgrade: websocket`, a
 * hibernatable WebSocket. The token may be `?access_token=` (EventSource and WebSocket cannot set
 * headers); the resume position is `Last-Event-ID` (or `?lastEventId=` for WebSocket clients). After
 * auth and validation the request is forwarded to the session object, which streams.
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../auth.js";
import { eventId, parse, watchQuery } from "../schemas.js";
import { conversationParam, query, session, type AppContext } from "./shared.js";

export const watchRoutes = new Hono<AppEnv>();

async function forward(c: AppContext, target: string): Promise<Response> {
  const stub = session(c);
  const q = query(c, watchQuery);
  const header = c.req.header("last-event-id");
  const lastEventId =
    header !== undefined ? parse(eventId, header, "invalid_cursor", "last-event-id") : q.lastEventId !== undefined ? parse(eventId, q.lastEventId, "invalid_cursor", "lastEventId") : undefined;
  const headers = new Headers();
  if (lastEventId !== undefined) headers.set("last-event-id", lastEventId);
  const upgrade = c.req.header("upgrade");
  if (upgrade !== undefined) headers.set("upgrade", upgrade);
  return stub.fetch(new Request(`https://session.internal/watch/${target}`, { headers, signal: c.req.raw.signal }));
}

watchRoutes.get("/:session/watch", requires("watch", { queryToken: true }), (c) => forward(c, "session"));

watchRoutes.get("/:session/conversations/:conversation/watch", requires("watch", { queryToken: true }), async (c) => {
  const ref = conversationParam(c);
  return forward(c, ref === "root" ? "root" : String(ref));
});
