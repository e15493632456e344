/**
 * The tenant's default retention (docs/operations.md "Retention"), kept by its DirectoryObject:
 *
 *   GET /v1/retention   (operator) `{ retention: { deleteAfterDays } | null }`
 *   PUT /v1/retention   (operator) the same body: sets (or with null clears) the default; a JSON body that is not one
 *                       is 422 invalid_retention naming the field, and writes nothing
 *
 * A session captures its retention when it is created: its template's (`retention`, null: none), else the tenant's
 * default (directory/templates.ts). A later change of either changes no existing session.
 */
import { Hono } from "hono";
import { z } from "zod";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import { noQuery, parse, tenantRetention } from "../../schemas.js";
import { body, query } from "./shared.js";

export const retentionRoutes = new Hono<AppEnv>();

retentionRoutes.get("/", requires("templates"), async (c) => {
  query(c, noQuery);
  const retention = await directoryStub(c.env, c.get("claims").tenant).retention();
  return c.json({ retention: retention ?? null });
});

retentionRoutes.put("/", requires("templates"), async (c) => {
  query(c, noQuery);
  // A body that is not JSON is 400/415 like every route; a JSON body that is not a retention is 422.
  const { retention } = parse(tenantRetention, await body(c, z.unknown()), "invalid_retention");
  const saved = await directoryStub(c.env, c.get("claims").tenant).setRetention(retention);
  return c.json({ retention: saved ?? null });
});
