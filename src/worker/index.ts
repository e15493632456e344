/**
 * The Worker entry: the Hono app and the session Durable Object class.
 */
export { SessionObject } from "./session-object.js";

export interface Env {
  readonly SESSIONS: DurableObjectNamespace;
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/health") return new Response("ok");
    return new Response("not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;
