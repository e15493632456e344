/**
 * The operator's signals (docs/operations.md "Stats"):
 *
 *   GET /v1/stats   (operator) sessions by status, live and quarantined tasks, outbox backlog and dead deliveries,
 *                   pending items and their earliest deadline
 *
 * Summed in the tenant's DirectoryObject from the counters each session pushes with its directory row
 * (session/directory-link.ts): no session object is opened, and the figures are at most `stalenessMs` old.
 */
import { Hono } from "hono";
import type { StatsResponse } from "../../../api/stats.js";
import { directoryStub } from "../../directory/object.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { ACTIVITY_INTERVAL_MS } from "../../session/directory-link.js";
import { noQuery } from "../../schemas.js";
import { query } from "./shared.js";

export const statsRoutes = new Hono<AppEnv>();

statsRoutes.get("/stats", requires("inspect"), async (c) => {
  query(c, noQuery);
  const stats = await directoryStub(c.env, c.get("claims").tenant).stats();
  const body: StatsResponse = {
    ...stats,
    earliestPendingDeadline:
      stats.earliestPendingDeadline === null ? null : new Date(stats.earliestPendingDeadline).toISOString(),
    stalenessMs: ACTIVITY_INTERVAL_MS,
  };
  return c.json(body);
});
