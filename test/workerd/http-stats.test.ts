/**
 * GET /v1/stats (docs/operations.md "Stats"): the tenant's operator signals are summed in its DirectoryObject from
 * the counters each session pushes with its directory row, never by opening a session; a session's own push carries
 * its counters; the route is an operator's and takes no query.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { DirectoryObject, DirectoryUpdate, SessionCounters } from "../../src/worker/directory/object.js";
import { call, json, token, uniqueSession, until } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `stats-${label}-${Date.now().toString(36)}-${tenants}`;
}

function directoryOf(tenant: string): DurableObjectStub<DirectoryObject> {
  return env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
}

interface Stats {
  sessions: { idle: number; busy: number; faulted: number };
  liveTasks: number;
  quarantinedTasks: number;
  outboxBacklog: number;
  deadDeliveries: number;
  pendingItems: number;
  earliestPendingDeadline: string | null;
  stalenessMs: number;
}

async function stats(tenant: string): Promise<Stats> {
  const response = await call("GET", "/v1/stats", { token: await token(tenant, "operator") });
  expect(response.status, await response.clone().text()).toBe(200);
  return json(response);
}

const none: SessionCounters = {
  quarantinedTasks: 0,
  outboxBacklog: 0,
  deadDeliveries: 0,
  pendingItems: 0,
  pendingDeadline: null,
};

function upsert(
  session: string,
  version: number,
  status: "idle" | "busy" | "faulted",
  liveTasks: number,
  counters: SessionCounters,
): DirectoryUpdate {
  return {
    type: "upsert",
    version,
    session,
    owner: undefined,
    title: undefined,
    labels: [],
    metadata: {},
    status,
    createdAt: 1,
    lastActivityAt: version,
    liveTasks,
    counters,
  };
}

describe("stats", () => {
  it("Stats count sessions by status without opening them", async () => {
    const tenant = uniqueTenant("count");
    // Rows pushed for sessions no object holds: a stats read that opened a session could not see them.
    const deadline = Date.UTC(2030, 0, 1, 12);
    await runInDurableObject(directoryOf(tenant), async (instance: DirectoryObject) => {
      await instance.apply(
        upsert("a", 1, "busy", 2, { ...none, outboxBacklog: 3, pendingItems: 1, pendingDeadline: deadline }),
      );
      await instance.apply(upsert("b", 1, "busy", 1, { ...none, pendingItems: 2, pendingDeadline: deadline - 60_000 }));
      await instance.apply(upsert("c", 1, "faulted", 1, { ...none, quarantinedTasks: 1, deadDeliveries: 4 }));
      await instance.apply(upsert("d", 1, "idle", 0, none));
      // A later update replaces a session's counters; a late retry of an older one changes nothing.
      await instance.apply(upsert("d", 3, "idle", 0, { ...none, outboxBacklog: 1 }));
      await instance.apply(upsert("d", 2, "busy", 5, { ...none, outboxBacklog: 9 }));
      // A deleted session counts nothing.
      await instance.apply(upsert("e", 1, "busy", 7, { ...none, pendingItems: 7, pendingDeadline: 1 }));
      await instance.apply({ type: "delete", version: 2, session: "e" });
    });
    expect(await stats(tenant)).toEqual({
      sessions: { idle: 1, busy: 2, faulted: 1 },
      liveTasks: 4,
      quarantinedTasks: 1,
      outboxBacklog: 4,
      deadDeliveries: 4,
      pendingItems: 3,
      earliestPendingDeadline: new Date(deadline - 60_000).toISOString(),
      stalenessMs: 60_000,
    });
    // A tenant with no sessions: zeros, and no deadline.
    expect(await stats(uniqueTenant("empty"))).toMatchObject({
      sessions: { idle: 0, busy: 0, faulted: 0 },
      liveTasks: 0,
      pendingItems: 0,
      earliestPendingDeadline: null,
    });
  });

  it("A session's directory update carries its counters; GET /v1/stats is an operator's and takes no query", async () => {
    const tenant = uniqueTenant("push");
    const operator = await token(tenant, "operator");
    const session = uniqueSession("stats");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: operator, body: {} })).status).toBe(201);
    const pushed = await until(async () => {
      const read = await stats(tenant);
      return read.sessions.idle === 1 ? read : undefined;
    }, "the session's directory row");
    expect(pushed).toMatchObject({ liveTasks: 0, quarantinedTasks: 0, outboxBacklog: 0, pendingItems: 0 });
    const row = await runInDurableObject(directoryOf(tenant), (_instance: DirectoryObject, state) =>
      state.storage.sql
        .exec("SELECT outbox_backlog, pending_items, pending_deadline FROM directory WHERE session = ?", session)
        .toArray(),
    );
    expect(row).toEqual([{ outbox_backlog: 0, pending_items: 0, pending_deadline: null }]);
    const client = await call("GET", "/v1/stats", { token: await token(tenant, "client") });
    expect(client.status).toBe(403);
    const withQuery = await call("GET", "/v1/stats?x=1", { token: operator });
    expect(withQuery.status).toBe(400);
    expect(await json(withQuery)).toMatchObject({ code: "invalid_query" });
  });
});
