/**
 * The tenant's default retention (docs/operations.md "Retention"), kept by its DirectoryObject:
 *
 *   GET /v1/retention   (operator) `{ retention: { deleteAfterDays } | null }`
 *   PUT /v1/retention   (operator) the same body: sets (or with null clears) the default; 400 invalid_body naming the
 *                       field
 *
 * A session captures its retention when it is created: its template's (`retention`, null: none), else the tenant's
 * default (directory/templates.ts). A later change of either changes no existing session.
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import { noQuery, tenantRetention } from "../../schemas.js";
import { body, query } from "./shared.js";

export const retentionRoutes = new Hono<AppEnv>();

retentionRoutes.get("/", requires("templates"), async (c) => {
  query(c, noQuery);
  const retention = await directoryStub(c.env, c.get("claims").tenant).retention();
  return c.json({ retention: retention ?? null });
});

retentionRoutes.put("/", requires("templates"), async (c) => {
  query(c, noQuery);
  const { retention } = await body(c, tenantRetention);
  const saved = await directoryStub(c.env, c.get("claims").tenant).setRetention(retention);
  return c.json({ retention: saved ?? null });
});
