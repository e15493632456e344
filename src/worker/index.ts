/**
 * The Worker entry: the Hono app (src/worker/http/app.ts) serves every request; the session and directory
 * Durable Object classes are exported for their bindings.
 */
import { app } from "./http/app.js";
import type { Env } from "./env.js";

export type { Env } from "./env.js";
export { SessionObject } from "./session/object.js";
export { DirectoryObject } from "./directory/object.js";
export { LimitsObject } from "./limits/object.js";

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    return Promise.resolve(app.fetch(request, env, ctx));
  },
} satisfies ExportedHandler<Env>;
