/**
 * The directory under load (docs/operations.md "Load"): listing a tenant of 10,000 sessions reads a
 * bounded number of rows per page however deep the cursor is, and accepting input never writes the
 * directory per input (a session sends its activity at most once a minute, after the commit).
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { call, json, token } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `scale-${label}-${Date.now().toString(36)}-${tenants}`;
}

type Stub = DurableObjectStub<DirectoryObject>;

function directoryOf(tenant: string): Stub {
  return env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
}

/** Rows the directory's SQL read while `run` ran (each cursor's rowsRead, counted in the object). */
async function rowsReadDuring(directory: Stub, run: () => Promise<void>): Promise<number> {
  const cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];
  let restore: (() => void) | undefined;
  await runInDurableObject(directory, (_instance: DirectoryObject, state) => {
    const sql = state.storage.sql;
    const exec = sql.exec.bind(sql);
    sql.exec = ((query: string, ...bindings: unknown[]) => {
      const cursor = exec(query, ...bindings);
      cursors.push(cursor);
      return cursor;
    }) as typeof sql.exec;
    restore = () => {
      sql.exec = exec;
    };
  });
  try {
    await run();
  } finally {
    await runInDurableObject(directory, () => restore?.());
  }
  expect(cursors.length).toBeGreaterThan(0);
  return cursors.reduce((n, cursor) => n + cursor.rowsRead, 0);
}

describe("directory at scale", () => {
  it("listing 10,000 sessions of a tenant pages in bounded reads", async () => {
    const tenant = uniqueTenant("list");
    const directory = directoryOf(tenant);
    const total = 10_000;
    // Seeded straight into the directory's table: 10,000 sessions, many sharing an activity time.
    await runInDurableObject(directory, (_instance: DirectoryObject, state) => {
      state.storage.transactionSync(() => {
        for (let i = 0; i < total; i++) {
          state.storage.sql.exec(
            `INSERT INTO directory (session, version, deleted, title, labels, created_at, last_activity_at, live_tasks) VALUES (?, 1, 0, NULL, '[]', 0, ?, 0)`,
            `s-${String(i).padStart(5, "0")}`,
            1_000_000 + Math.floor(i / 7),
          );
        }
      });
    });
    const auth = await token(tenant, "client");
    const limit = 100;
    const seen = new Set<string>();
    const reads: number[] = [];
    let cursor: string | undefined;
    do {
      let page: { items: { session: string }[]; cursor?: string } = { items: [] };
      const query = `?limit=${limit}${cursor === undefined ? "" : `&cursor=${cursor}`}`;
      reads.push(
        await rowsReadDuring(directory, async () => {
          const response = await call("GET", `/v1/sessions${query}`, { token: auth });
          expect(response.status).toBe(200);
          page = await json(response);
        }),
      );
      expect(page.items.length).toBeLessThanOrEqual(limit);
      for (const item of page.items) seen.add(item.session);
      cursor = page.cursor;
    } while (cursor !== undefined);
    expect(seen.size).toBe(total);
    expect(reads.length).toBe(total / limit);
    // Every page, the first and the hundredth alike, reads about one page of rows (plus ties at the
    // cursor's activity time), never the rows before the cursor.
    expect(Math.max(...reads)).toBeLessThanOrEqual(limit + 1 + 7 + 5);
  }, 120_000);

  it("accepting input does not write the directory per input", async () => {
    const tenant = uniqueTenant("accept");
    const auth = await token(tenant, "client");
    expect((await call("PUT", "/v1/sessions/busy", { token: auth, body: {} })).status).toBe(201);
    const directory = directoryOf(tenant);
    const version = async (): Promise<number> =>
      runInDurableObject(directory, (_instance: DirectoryObject, state) =>
        Number(state.storage.sql.exec("SELECT version FROM directory WHERE session = 'busy'").one()["version"]),
      );
    const before = await version();
    for (let i = 0; i < 20; i++) {
      expect(
        (
          await call("POST", "/v1/sessions/busy/conversations/root/inputs?wait=10", {
            token: auth,
            body: { input: `input ${i}` },
          })
        ).status,
      ).toBe(201);
    }
    // Created a moment ago: the activity of 20 turns waits for the once-a-minute update (the alarm).
    expect(await version()).toBe(before);
  });
});
