/**
 * Search and metadata end to end (docs/api.md "Search and metadata"): a session's `metadata` set at create and
 * merged by PATCH (null deletes a key), its limits refused with 422 `invalid_metadata` writing nothing, what a user may
 * set decided by the template, and `GET /v1/sessions` filtering in the directory's own indexes by owner, metadata
 * pairs, status (idle, busy, faulted) and activity range, paged by cursor. Every assertion names the exact set.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { erase } from "../../src/core/task-kind.js";
import { sessionObjectName } from "../../src/worker/identity/owner.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import { DEFAULT_KILL_BOUND } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { DIRECTORY_SCHEMA_VERSION, migrateDirectory } from "../../src/worker/directory/sessions.js";
import { call, client, json, lastSeq, token, until } from "./http-fixtures.js";
import {
  call as BACKGROUND,
  clearLog,
  contractKind,
  stuckKind,
  waitForCalls,
  harnessOf,
  installSeams,
  resetSeams,
  type Seams,
} from "./session-fixtures.js";
import { putUserTemplate } from "./users-fixtures.js";

interface Row {
  session: string;
  owner?: string;
  title?: string;
  labels: string[];
  metadata: Record<string, string>;
  status: "idle" | "busy" | "faulted";
  createdAt: number;
  lastActivityAt: number;
  liveTasks: number;
}
interface Page {
  items: Row[];
  cursor?: string;
}
interface ProblemBody {
  code: string;
  field?: string;
  status: number;
}

let seams: Seams;
let tenants = 0;
let tenant = "";

beforeEach(() => {
  seams = installSeams();
  tenants += 1;
  tenant = `search-${tenants}-${Date.now().toString(36)}`;
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const operator = (): Promise<string> => token(tenant, "operator");
const user = (sub: string): Promise<string> => token(tenant, "user", { sub });

async function create(auth: string, name: string, body: Record<string, unknown> = {}): Promise<void> {
  const response = await call("PUT", `/v1/sessions/${name}`, { token: auth, body });
  expect(response.status, await response.clone().text()).toBe(201);
}

async function list(auth: string, params = ""): Promise<Page> {
  const response = await call("GET", `/v1/sessions${params}`, { token: auth });
  expect(response.status, await response.clone().text()).toBe(200);
  return json<Page>(response);
}

/** The names one listing returns, sorted (the sets the tests assert). */
async function names(auth: string, params = ""): Promise<string[]> {
  return (await list(auth, params)).items.map((row) => row.session).sort();
}

async function problem(response: Response): Promise<ProblemBody> {
  return json<ProblemBody>(response);
}

/** The session's directory row as the operator's listing shows it. */
async function row(name: string): Promise<Row | undefined> {
  return (await list(await operator(), "?limit=200")).items.find((item) => item.session === name);
}

function sessionObject(name: string): DurableObjectStub<SessionObject> {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionObjectName(tenant, name)));
}

/**
 * A minute later, the session's alarm: what sends an activity update (and the status riding it) that waited for the
 * once-a-minute interval.
 */
async function nextMinute(name: string): Promise<void> {
  seams.time.now += 61_000;
  expect(await runDurableObjectAlarm(sessionObject(name))).toBe(true);
}

/** Poll the listing until `params` lists exactly `expected` (a status report goes out after its commit). */
async function untilListed(params: string, expected: string[]): Promise<void> {
  const auth = await operator();
  await until(
    async () => ((await names(auth, params)).join(",") === expected.join(",") ? true : undefined),
    `${params} to list ${expected.join(", ")}`,
    500,
  );
}

describe("session metadata", () => {
  it("metadata set at create is read back and listed; PATCH merges keys and null deletes one", async () => {
    const auth = await operator();
    await create(auth, "alpha", { title: "Alpha", metadata: { team: "blue", tier: "gold" } });
    expect(await json(await call("GET", "/v1/sessions/alpha", { token: auth }))).toMatchObject({
      title: "Alpha",
      metadata: { team: "blue", tier: "gold" },
    });
    expect((await row("alpha"))?.metadata).toEqual({ team: "blue", tier: "gold" });

    const patched = await call("PATCH", "/v1/sessions/alpha", {
      token: auth,
      body: { metadata: { tier: null, region: "eu-west.1" }, labels: ["x"] },
    });
    expect(patched.status).toBe(200);
    expect(await json(patched)).toEqual({
      session: "alpha",
      title: "Alpha",
      labels: ["x"],
      metadata: { team: "blue", region: "eu-west.1" },
    });
    expect((await row("alpha"))?.metadata).toEqual({ team: "blue", region: "eu-west.1" });
    // The index follows: the deleted pair no longer matches, the new one does.
    expect(await names(auth, "?metadata.tier=gold")).toEqual([]);
    expect(await names(auth, "?metadata.region=eu-west.1")).toEqual(["alpha"]);
    expect(await names(auth, "?metadata.team=blue")).toEqual(["alpha"]);

    // A PATCH of the title alone keeps the metadata.
    await call("PATCH", "/v1/sessions/alpha", { token: auth, body: { title: "Renamed" } });
    expect((await row("alpha"))?.metadata).toEqual({ team: "blue", region: "eu-west.1" });

    // A deleted session leaves the index.
    expect((await call("DELETE", "/v1/sessions/alpha", { token: auth })).status).toBe(200);
    expect(await names(auth, "?metadata.team=blue")).toEqual([]);
  });

  it("metadata over its limits is 422 invalid_metadata naming the field, and writes nothing", async () => {
    const auth = await operator();
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"]));
    const cases: [Record<string, unknown>, string][] = [
      [{ metadata: many }, "metadata"],
      [{ metadata: { "no spaces": "v" } }, "metadata.no spaces"],
      [{ metadata: { k: "x".repeat(257) } }, "metadata.k"],
      [{ metadata: { k: 7 } }, "metadata.k"],
      [{ metadata: { ["k".repeat(65)]: "v" } }, `metadata.${"k".repeat(65)}`],
    ];
    for (const [body, field] of cases) {
      const refused = await call("PUT", "/v1/sessions/never", { token: auth, body });
      expect(refused.status).toBe(422);
      expect(await problem(refused)).toMatchObject({ code: "invalid_metadata", field });
    }
    expect(await lastSeq(tenant, "never")).toBe(0);
    expect(await names(auth)).toEqual([]);

    // 32 keys at the limit, 256 characters at the limit: accepted.
    const full = Object.fromEntries(Array.from({ length: 31 }, (_, i) => [`k${i}`, "v"]));
    await create(auth, "full", { title: "Full", metadata: { ...full, long: "y".repeat(256) } });
    const before = await row("full");
    // A patch that would make 33 keys is refused with its title change: nothing is written.
    const over = await call("PATCH", "/v1/sessions/full", {
      token: auth,
      body: { title: "Changed", metadata: { extra: "v" } },
    });
    expect(over.status).toBe(422);
    expect(await problem(over)).toMatchObject({ code: "invalid_metadata", field: "metadata" });
    const bad = await call("PATCH", "/v1/sessions/full", { token: auth, body: { metadata: { k0: "z".repeat(257) } } });
    expect(await problem(bad)).toMatchObject({ status: 422, code: "invalid_metadata", field: "metadata.k0" });
    expect(await row("full")).toEqual(before);
    expect(await json(await call("GET", "/v1/sessions/full", { token: auth }))).toMatchObject({ title: "Full" });
    // Deleting one key makes room for another in the same patch.
    const swapped = await call("PATCH", "/v1/sessions/full", {
      token: auth,
      body: { metadata: { k0: null, extra: "v" } },
    });
    expect(swapped.status).toBe(200);
    const after = (await json<{ metadata: Record<string, string> }>(swapped)).metadata;
    expect(Object.keys(after)).toHaveLength(32);
    expect(after["k0"]).toBeUndefined();
    expect(after["extra"]).toBe("v");
  });

  it("a user sets metadata only when the session's template marks it user-settable", async () => {
    await putUserTemplate(tenant, "closed", { model: "echo", userSettable: ["title"], metadata: { product: "a" } });
    await putUserTemplate(tenant, "open", { model: "echo", userSettable: ["metadata"], metadata: { product: "b" } });
    const u1 = await user("u1");

    const refused = await call("PUT", "/v1/sessions/u1-closed", {
      token: u1,
      body: { template: "closed", metadata: { mine: "1" } },
    });
    expect(refused.status).toBe(403);
    expect(await problem(refused)).toMatchObject({ code: "forbidden", field: "metadata" });
    expect(await lastSeq(tenant, "u1-closed")).toBe(0);

    await create(u1, "u1-closed", { template: "closed", title: "Mine" });
    const patchClosed = await call("PATCH", "/v1/sessions/u1-closed", { token: u1, body: { metadata: { mine: "1" } } });
    expect(patchClosed.status).toBe(403);
    expect(await problem(patchClosed)).toMatchObject({ code: "forbidden", field: "metadata" });
    expect((await row("u1-closed"))?.metadata).toEqual({ product: "a" });

    // The template's metadata are defaults under the user's keys.
    await create(u1, "u1-open", { template: "open", metadata: { mine: "1" } });
    expect((await row("u1-open"))?.metadata).toEqual({ product: "b", mine: "1" });
    const patchOpen = await call("PATCH", "/v1/sessions/u1-open", {
      token: u1,
      body: { metadata: { mine: null, theirs: "2" } },
    });
    expect(patchOpen.status).toBe(200);
    expect((await row("u1-open"))?.metadata).toEqual({ product: "b", theirs: "2" });
    // Metadata does not open the title: the open template lets users set metadata only.
    expect((await call("PATCH", "/v1/sessions/u1-open", { token: u1, body: { title: "t" } })).status).toBe(403);
  });
});

describe("GET /v1/sessions filters", () => {
  it("an operator filters by owner; a user's listing shows only their sessions and may name no other owner", async () => {
    await putUserTemplate(tenant);
    const [u1, u2, op] = [await user("u1"), await user("u2"), await operator()];
    await create(u1, "a1", { template: "end-user" });
    await create(u1, "a2", { template: "end-user" });
    await create(u2, "b1", { template: "end-user" });
    await create(op, "tenant-owned");

    expect(await names(op)).toEqual(["a1", "a2", "b1", "tenant-owned"]);
    expect(await names(op, "?owner=u1")).toEqual(["a1", "a2"]);
    expect(await names(op, "?owner=u2")).toEqual(["b1"]);
    expect(await names(op, "?owner=nobody")).toEqual([]);
    expect((await list(op, "?owner=u1")).items.map((item) => item.owner)).toEqual(["u1", "u1"]);

    expect(await names(u1)).toEqual(["a1", "a2"]);
    expect(await names(u1, "?owner=u1")).toEqual(["a1", "a2"]);
    expect(await names(u2)).toEqual(["b1"]);
    const other = await call("GET", "/v1/sessions?owner=u2", { token: u1 });
    expect(other.status).toBe(403);
    expect(await problem(other)).toMatchObject({ code: "forbidden", field: "owner" });
    // Every other filter keeps the user's own scope.
    expect(await names(u1, "?status=idle")).toEqual(["a1", "a2"]);
  });

  it("Sessions are found by metadata and owner without opening them", async () => {
    await putUserTemplate(tenant);
    const [u1, u2, op] = [await user("u1"), await user("u2"), await operator()];
    await create(u1, "u1-blue", { template: "end-user" });
    await create(u1, "u1-red", { template: "end-user" });
    await create(op, "op-blue", { metadata: { team: "blue" } });
    // The end-user template does not let users set metadata: the operator labels their sessions.
    for (const [name, team] of [
      ["u1-blue", "blue"],
      ["u1-red", "red"],
    ] as const) {
      const patched = await call("PATCH", `/v1/sessions/${name}`, { token: op, body: { metadata: { team } } });
      expect(patched.status, await patched.clone().text()).toBe(200);
    }
    // Each session's own storage is wiped: what the listing answers must come from the directory alone.
    for (const name of ["u1-blue", "u1-red", "op-blue"]) {
      const namespace = env.SESSIONS;
      const stub = namespace.get(namespace.idFromName(sessionObjectName(tenant, name)));
      await runInDurableObject(stub, async (_instance: SessionObject, state) => {
        await state.storage.deleteAll();
      });
    }
    await abortAllDurableObjects();
    expect(await names(op, "?metadata.team=blue")).toEqual(["op-blue", "u1-blue"]);
    expect(await names(op, "?owner=u1&metadata.team=blue")).toEqual(["u1-blue"]);
    expect(await names(op, "?owner=u1")).toEqual(["u1-blue", "u1-red"]);
    expect(await names(u1, "?metadata.team=red")).toEqual(["u1-red"]);
    expect(await names(u2, "?metadata.team=blue")).toEqual([]);
  });

  it("metadata pairs combine: every metadata.{key} parameter must match", async () => {
    const op = await operator();
    await create(op, "blue-gold", { metadata: { team: "blue", tier: "gold" } });
    await create(op, "blue-free", { metadata: { team: "blue", tier: "free" } });
    await create(op, "red-gold", { metadata: { team: "red", tier: "gold" } });
    await create(op, "blue-only", { metadata: { team: "blue" } });
    await create(op, "none");

    expect(await names(op, "?metadata.team=blue")).toEqual(["blue-free", "blue-gold", "blue-only"]);
    expect(await names(op, "?metadata.tier=gold")).toEqual(["blue-gold", "red-gold"]);
    expect(await names(op, "?metadata.team=blue&metadata.tier=gold")).toEqual(["blue-gold"]);
    expect(await names(op, "?metadata.team=red&metadata.tier=free")).toEqual([]);
    // The typed client sends the pairs as metadata.{key} parameters.
    const typed = await client(tenant, "operator");
    const page = await typed.sessions({ metadata: { team: "blue", tier: "gold" }, status: "idle" });
    expect(page.items.map((item) => [item.session, item.metadata])).toEqual([
      ["blue-gold", { team: "blue", tier: "gold" }],
    ]);
    // Values match exactly (no prefix or case folding).
    expect(await names(op, "?metadata.team=Blue")).toEqual([]);
    expect(await names(op, "?metadata.team=blu")).toEqual([]);

    const badKey = await call("GET", "/v1/sessions?metadata.bad%20key=x", { token: op });
    expect(badKey.status).toBe(400);
    expect(await problem(badKey)).toMatchObject({ code: "invalid_query", field: "metadata.bad key" });
    const unknown = await call("GET", "/v1/sessions?team=blue", { token: op });
    expect(await problem(unknown)).toMatchObject({ status: 400, code: "invalid_query", field: "team" });
  });

  it("status: idle without work, busy while a turn waits on a client tool, faulted after a task breaks its contract", async () => {
    const op = await operator();
    const deploy = await call("PUT", "/v1/tools/deploy", {
      token: op,
      body: {
        description: "deploy",
        parameters: { type: "object", properties: {} },
        handler: { type: "client", timeoutMs: 86_400_000 },
      },
    });
    expect(deploy.status, await deploy.clone().text()).toBe(201);
    // Registered before any session opens: the faulty session's harness knows the kind.
    registerTestKinds([erase(contractKind(true))]);
    await create(op, "quiet");
    await create(op, "working", { selectedTools: ["deploy"] });
    await create(op, "broken");
    expect((await row("quiet"))?.status).toBe("idle");
    expect(await names(op, "?status=idle")).toEqual(["broken", "quiet", "working"]);

    const accepted = await call("POST", "/v1/sessions/working/conversations/root/inputs", {
      token: op,
      body: { input: "/call deploy {}" },
    });
    expect(accepted.status).toBe(201);
    // The turn's status rides the activity update: created a moment ago, the session sends it a minute on, not per
    // input.
    expect(await names(op, "?status=busy")).toEqual([]);
    await nextMinute("working");
    await untilListed("?status=busy", ["working"]);
    expect((await row("working"))?.liveTasks).toBeGreaterThan(0);

    await call("GET", "/v1/sessions/broken", { token: op }); // the session is open in this instance
    await runInDurableObject(sessionObject("broken"), async (instance: SessionObject) => {
      const root = await harnessOf(instance).root(BACKGROUND);
      await root.commit((tx) => tx.task(contractKind(true), { state: { status: "pending", note: "" } }), BACKGROUND);
    });
    // The fault has no commit to ride: it is sent at once.
    await untilListed("?status=faulted", ["broken"]);
    expect(await names(op, "?status=idle")).toEqual(["quiet"]);
    expect(await names(op, "?status=busy")).toEqual(["working"]);
    expect((await row("broken"))?.status).toBe("faulted");

    // The operator deploys a kind that keeps the contract and clears the fault: the task runs, the session is idle.
    registerTestKinds([erase(contractKind(false))]);
    await abortAllDurableObjects();
    const cleared = await call("POST", "/v1/sessions/broken/fault/clear", { token: op });
    expect(await json(cleared)).toEqual({ cleared: true });
    await until(async () => ((await row("broken"))?.status !== "faulted" ? true : undefined), "the clear is sent");
    await nextMinute("broken");
    await untilListed("?status=idle", ["broken", "quiet"]);
    expect(await names(op, "?status=faulted")).toEqual([]);

    const badStatus = await call("GET", "/v1/sessions?status=sleeping", { token: op });
    expect(await problem(badStatus)).toMatchObject({ status: 400, code: "invalid_query", field: "status" });
  });

  it("status: a quarantined task lists its session as faulted at once; once the task is aborted, idle", async () => {
    const op = await operator();
    clearLog();
    registerTestKinds([erase(stuckKind)]);
    await create(op, "stuck");
    const id = await runInDurableObject(sessionObject("stuck"), async (instance: SessionObject) => {
      const root = await harnessOf(instance).root(BACKGROUND);
      return root.commit((tx) => tx.task(stuckKind, { state: { status: "pending", recovers: false } }), BACKGROUND);
    });
    await waitForCalls(id, 1);
    // Each kill while it works counts; at the bound its recover is withheld: quarantined.
    for (let kill = 1; kill <= DEFAULT_KILL_BOUND; kill += 1) {
      await abortAllDurableObjects();
      expect(await runDurableObjectAlarm(sessionObject("stuck"))).toBe(true);
    }
    await untilListed("?status=faulted", ["stuck"]);

    const aborted = await call("POST", `/v1/sessions/stuck/tasks/${id}/abort`, { token: op });
    expect(aborted.status).toBe(200);
    await waitForCalls(id, DEFAULT_KILL_BOUND + 1);
    await nextMinute("stuck");
    await untilListed("?status=idle", ["stuck"]);
    expect(await names(op, "?status=faulted")).toEqual([]);
  });

  it("activity range: activeSince and activeBefore select by the directory's lastActivityAt (epoch ms or ISO 8601)", async () => {
    const op = await operator();
    const start = Math.floor(seams.time.now / 60_000) * 60_000 + 60_000;
    const at = (minutes: number): number => start + minutes * 60_000;
    for (const [name, minutes] of [
      ["m0", 0],
      ["m5", 5],
      ["m10", 10],
      ["m20", 20],
    ] as const) {
      seams.time.now = at(minutes);
      await create(op, name);
    }
    expect((await row("m5"))?.lastActivityAt).toBe(at(5));

    expect(await names(op, `?activeSince=${at(5)}`)).toEqual(["m10", "m20", "m5"]);
    expect(await names(op, `?activeBefore=${at(10)}`)).toEqual(["m0", "m5"]);
    expect(await names(op, `?activeSince=${at(5)}&activeBefore=${at(20)}`)).toEqual(["m10", "m5"]);
    const iso = (ms: number): string => encodeURIComponent(new Date(ms).toISOString());
    expect(await names(op, `?activeSince=${iso(at(1))}&activeBefore=${iso(at(11))}`)).toEqual(["m10", "m5"]);
    expect(await names(op, `?activeSince=${at(21)}`)).toEqual([]);

    const bad = await call("GET", "/v1/sessions?activeSince=yesterday", { token: op });
    expect(await problem(bad)).toMatchObject({ status: 400, code: "invalid_query", field: "activeSince" });
  });

  it("a filtered listing pages with a cursor: every match once, newest activity first", async () => {
    const op = await operator();
    const base = Math.floor(seams.time.now / 60_000) * 60_000 + 60_000;
    for (let i = 0; i < 7; i++) {
      seams.time.now = base + i * 60_000;
      await create(op, `p${i}`, { metadata: { team: i % 3 === 2 ? "red" : "blue" } });
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await list(op, `?metadata.team=blue&limit=2${cursor === undefined ? "" : `&cursor=${cursor}`}`);
      seen.push(...page.items.map((item) => item.session));
      cursor = page.cursor;
      pages += 1;
    } while (cursor !== undefined);
    expect(seen).toEqual(["p6", "p4", "p3", "p1", "p0"]);
    expect(pages).toBe(3);
    // A user's cursor is not good on the operator's listing, nor the other way round.
    const first = await list(op, "?metadata.team=blue&limit=2");
    const foreign = await call("GET", `/v1/sessions?limit=2&cursor=${first.cursor!}`, { token: await user("u9") });
    expect(await problem(foreign)).toMatchObject({ status: 400, code: "invalid_cursor" });
  });
});

describe("the directory's schema", () => {
  it("a directory written before versions gains metadata and status, keeping its rows; a newer schema refuses to open", async () => {
    const stub = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(stub, async (instance: DirectoryObject, state) => {
      const sql = state.storage.sql;
      // The layout before versions: no schema row, no metadata or status.
      sql.exec("DROP TABLE directory");
      sql.exec("DROP TABLE directory_metadata");
      sql.exec("DELETE FROM directory_schema");
      sql.exec(`CREATE TABLE directory (session TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted INTEGER NOT NULL,
        title TEXT, labels TEXT NOT NULL, created_at INTEGER NOT NULL, last_activity_at INTEGER NOT NULL,
        live_tasks INTEGER NOT NULL, owner TEXT)`);
      sql.exec("INSERT INTO directory VALUES ('old', 5, 0, 'Old', '[\"x\"]', 1000, 2000, 0, 'u1')");
      migrateDirectory(state.storage);
      expect(sql.exec("SELECT version FROM directory_schema").one()["version"]).toBe(DIRECTORY_SCHEMA_VERSION);
      expect(instance.list({ limit: 10 }).items).toEqual([
        {
          session: "old",
          owner: "u1",
          title: "Old",
          labels: ["x"],
          metadata: {},
          status: "idle",
          createdAt: 1000,
          lastActivityAt: 2000,
          liveTasks: 0,
        },
      ]);
      // The row's next update indexes its metadata.
      await instance.apply({
        type: "upsert",
        version: 6,
        session: "old",
        owner: "u1",
        title: "Old",
        labels: ["x"],
        metadata: { team: "blue" },
        status: "busy",
        createdAt: 1000,
        lastActivityAt: 3000,
        liveTasks: 1,
      });
      expect(
        instance.list({ limit: 10, metadata: { team: "blue" }, status: "busy" }).items.map((r) => r.session),
      ).toEqual(["old"]);
      // Running it again changes nothing; a version from newer code refuses unless it is one ahead and additive.
      migrateDirectory(state.storage);
      sql.exec("UPDATE directory_schema SET version = ?, additive = 0", DIRECTORY_SCHEMA_VERSION + 1);
      expect(() => migrateDirectory(state.storage)).toThrow(/newer than this code/);
      sql.exec("UPDATE directory_schema SET version = ?", DIRECTORY_SCHEMA_VERSION);
    });
  });
});
