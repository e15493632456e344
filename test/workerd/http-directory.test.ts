/**
 * The tenant directory end to end (docs/api.md "Directory"): GET /v1/sessions lists what PUT
 * created (200 at once), forgets what DELETE removed, pages with a cursor, filters with q, shows the
 * title and labels PUT and PATCH set, and an update the directory refused is retried from the session's
 * alarm until acknowledged.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { call, json, token } from "./http-fixtures.js";
import { installSeams, resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

interface Row {
  session: string;
  title?: string;
  labels: string[];
  createdAt: number;
  lastActivityAt: number;
  liveTasks: number;
}
interface Page {
  items: Row[];
  cursor?: string;
}

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `dir-${label}-${Date.now().toString(36)}-${tenants}`;
}

async function list(auth: string, params = ""): Promise<Page> {
  const response = await call("GET", `/v1/sessions${params}`, { token: auth });
  expect(response.status).toBe(200);
  return json<Page>(response);
}

async function listAll(auth: string, limit: number): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await list(auth, `?limit=${limit}${cursor === undefined ? "" : `&cursor=${cursor}`}`);
    rows.push(...page.items);
    if (page.cursor === undefined) return rows;
    cursor = page.cursor;
  }
}

describe("GET /v1/sessions", () => {
  it("lists 200 sessions created concurrently, and not after their deletion", async () => {
    const tenant = uniqueTenant("many");
    const auth = await token(tenant, "operator");
    const names = Array.from({ length: 200 }, (_, i) => `s-${String(i).padStart(3, "0")}`);
    const created = await Promise.all(names.map((name) => call("PUT", `/v1/sessions/${name}`, { token: auth })));
    expect(created.map((r) => r.status)).toEqual(names.map(() => 201));
    const rows = await listAll(auth, 37);
    expect(rows.map((r) => r.session).sort()).toEqual(names);
    // Newest activity first.
    for (let i = 1; i < rows.length; i++)
      expect(rows[i - 1]!.lastActivityAt).toBeGreaterThanOrEqual(rows[i]!.lastActivityAt);
    const gone = names.filter((_, i) => i % 3 === 0);
    const deleted = await Promise.all(gone.map((name) => call("DELETE", `/v1/sessions/${name}`, { token: auth })));
    expect(deleted.map((r) => r.status)).toEqual(gone.map(() => 200));
    const after = await listAll(auth, 50);
    expect(after.map((r) => r.session).sort()).toEqual(names.filter((n) => !gone.includes(n)));
    // Another tenant sees none of them.
    expect((await list(await token(uniqueTenant("other"), "client"))).items).toEqual([]);
  }, 180_000);

  it("pages newest activity first and filters by name, title or label", async () => {
    const tenant = uniqueTenant("page");
    const auth = await token(tenant, "client");
    expect(
      (
        await call("PUT", "/v1/sessions/alpha", {
          token: auth,
          body: { title: "Quarterly report", labels: ["team:finance"] },
        })
      ).status,
    ).toBe(201);
    expect((await call("PUT", "/v1/sessions/beta", { token: auth })).status).toBe(201);
    expect((await call("PUT", "/v1/sessions/gamma", { token: auth, body: { labels: ["urgent"] } })).status).toBe(201);
    const first = await list(auth, "?limit=2");
    expect(first.items).toHaveLength(2);
    expect(first.cursor).toBeDefined();
    const second = await list(auth, `?limit=2&cursor=${first.cursor!}`);
    expect(second.items).toHaveLength(1);
    expect(second.cursor).toBeUndefined();
    expect([...first.items, ...second.items].map((r) => r.session).sort()).toEqual(["alpha", "beta", "gamma"]);
    const alpha = [...first.items, ...second.items].find((r) => r.session === "alpha")!;
    expect(alpha).toMatchObject({ title: "Quarterly report", labels: ["team:finance"], liveTasks: 0 });
    expect(alpha.createdAt).toBeGreaterThan(0);
    expect((await list(auth, "?q=QUARTERLY")).items.map((r) => r.session)).toEqual(["alpha"]);
    expect((await list(auth, "?q=urgent")).items.map((r) => r.session)).toEqual(["gamma"]);
    expect((await list(auth, "?q=bet")).items.map((r) => r.session)).toEqual(["beta"]);
    expect((await list(auth, "?q=%25")).items).toEqual([]);
    const bad = await call("GET", "/v1/sessions?cursor=nope", { token: auth });
    expect(bad.status).toBe(400);
    expect((await call("GET", "/v1/sessions?limit=0", { token: auth })).status).toBe(400);
    expect((await call("GET", "/v1/sessions?limit=201", { token: auth })).status).toBe(400);
    expect((await call("GET", "/v1/sessions?order=x", { token: auth })).status).toBe(400);
  });

  it("PATCH changes title and labels; a bad patch writes nothing", async () => {
    const tenant = uniqueTenant("patch");
    const auth = await token(tenant, "client");
    expect((await call("PUT", "/v1/sessions/one", { token: auth, body: { title: "First" } })).status).toBe(201);
    const patched = await call("PATCH", "/v1/sessions/one", { token: auth, body: { labels: ["a", "b"] } });
    expect(patched.status).toBe(200);
    expect(await json(patched)).toEqual({ session: "one", title: "First", labels: ["a", "b"], metadata: {} });
    expect((await list(auth)).items[0]).toMatchObject({ session: "one", title: "First", labels: ["a", "b"] });
    const cleared = await call("PATCH", "/v1/sessions/one", { token: auth, body: { title: null } });
    expect(await json(cleared)).toEqual({ session: "one", title: null, labels: ["a", "b"], metadata: {} });
    expect((await list(auth)).items[0]!.title).toBeUndefined();
    expect((await call("PATCH", "/v1/sessions/one", { token: auth, body: {} })).status).toBe(400);
    expect((await call("PATCH", "/v1/sessions/one", { token: auth, body: { labels: ["no spaces"] } })).status).toBe(
      400,
    );
    expect((await call("PATCH", "/v1/sessions/missing", { token: auth, body: { title: "x" } })).status).toBe(404);
    expect((await list(auth)).items.map((r) => r.session)).toEqual(["one"]);
    const summary = await json(await call("GET", "/v1/sessions/one", { token: auth }));
    expect(summary).toMatchObject({ title: null, labels: ["a", "b"] });
  });

  it("an update the directory refused is retried from the session's alarm until acknowledged", async () => {
    const seams = installSeams();
    const tenant = uniqueTenant("retry");
    const auth = await token(tenant, "operator");
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      instance.refusing = 2;
    });
    expect((await call("PUT", "/v1/sessions/lonely", { token: auth })).status).toBe(201);
    expect((await list(auth)).items).toEqual([]);
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`${tenant}:lonely`));
    // An alarm before the retry is due sends nothing; the first retry is refused too (backing off);
    // the second is acknowledged.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await list(auth)).items).toEqual([]);
    seams.time.now += 1_000;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await list(auth)).items).toEqual([]);
    seams.time.now += 1_000;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await list(auth)).items).toEqual([]);
    seams.time.now += 1_000;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await list(auth)).items.map((r) => r.session)).toEqual(["lonely"]);
    // Nothing pending: no alarm remains for the directory (the session is idle).
    expect(await runDurableObjectAlarm(stub)).toBe(false);

    // A refused deletion is retried the same way, after the session's storage is gone.
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      instance.refusing = 1;
    });
    expect((await call("DELETE", "/v1/sessions/lonely", { token: auth })).status).toBe(200);
    expect((await list(auth)).items.map((r) => r.session)).toEqual(["lonely"]);
    seams.time.now += 1_000;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await list(auth)).items).toEqual([]);
    expect(await runDurableObjectAlarm(stub)).toBe(false);
  });
});
