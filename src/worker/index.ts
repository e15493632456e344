/**
 * The Worker entry: the Hono app and the session Durable Object class.
 */
import type { Env } from "./env.js";

export type { Env } from "./env.js";
export { SessionObject } from "./session-object.js";

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/health") return new Response("ok");
    return new Response("not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;
