/**
 * Forward compatibility (docs/operations.md "Upgrading" and "Rolling back"): after a rollback, this release opens
 * storage that the next release migrated one version ahead when that version only adds (its additive mark), and
 * keeps working there, for the session's storage and the tenant directory's alike. The next release is played by a
 * synthetic migration that only adds (a table and a column with a default), applied through the same `migrate`
 * with this code's list plus that one. More than one version ahead, or one ahead without the mark, is refused.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { migrate, migration, MIGRATIONS, SCHEMA_VERSION } from "../../src/storage/migrations.js";
import { StorageError } from "../../src/storage/storage.js";
import type { SqlHost } from "../../src/storage/sql.js";
import { DIRECTORY_SCHEMA_VERSION, migrateDirectory, type DirectoryStep } from "../../src/worker/directory/sessions.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, client, lastSeq, stubOf, token, uniqueSession } from "./http-fixtures.js";

/** The next release's migration: it only adds, and says so on its first line. */
const NEXT = migration(
  SCHEMA_VERSION + 1,
  "next_adds_notes",
  [
    "-- additive: yes (a new table and a column with a default)",
    "CREATE TABLE next_release_notes (id INTEGER PRIMARY KEY, note TEXT NOT NULL);",
    "ALTER TABLE entries ADD COLUMN next_note TEXT;",
    "INSERT INTO next_release_notes (note) VALUES ('written by the next release');",
  ].join("\n"),
);
const NEXT_DIRECTORY: DirectoryStep = {
  additive: true,
  run: (sql) => sql.exec("ALTER TABLE directory ADD COLUMN next_note TEXT"),
};

function schemaOf(state: DurableObjectState): { version: unknown; additive: unknown } {
  const rows = state.storage.sql
    .exec("SELECT name, value FROM session_metadata WHERE name IN ('schema_version', 'schema_additive')")
    .toArray();
  const value = (name: string): unknown => rows.find((row) => row["name"] === name)?.["value"];
  return { version: value("schema_version"), additive: value("schema_additive") };
}

function sessionObject(tenant: string, session: string): DurableObjectStub<SessionObject> {
  return stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>;
}

afterEach(async () => {
  await abortAllDurableObjects();
});

describe("forward compatibility: one additive schema version ahead", () => {
  it("This release opens storage one additive schema version ahead and continues its work", async () => {
    const tenant = "upgrade-ahead";
    const session = uniqueSession("ahead");
    const api = await client(tenant);
    const s = api.session(session);
    await s.create({ model: "echo" });
    const root = s.conversation("root");
    expect((await root.accept("before the next release", { wait: 20 })).status).toBe("done");
    // Work in flight when the next release migrates: an input queued for the next run.
    const queued = await root.accept("queued before the next release", { mode: "nextRun" });
    expect(queued.status).toBe("queued");

    // Quiet before the switch: the session's directory row has landed (no call of it in flight at the restart).
    await expect
      .poll(async () => (await api.sessions({ limit: 100 })).items.map((row) => row.session))
      .toEqual([session]);
    // The next release opens the session: it migrates one version ahead and marks it additive.
    await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
      expect(migrate(state.storage, [...MIGRATIONS, NEXT])).toBe(SCHEMA_VERSION + 1);
      expect(schemaOf(state)).toEqual({ version: SCHEMA_VERSION + 1, additive: 1 });
    });
    // ...and the tenant directory one version ahead too.
    // (A stub does not outlive abortAllDurableObjects: each step takes a new one.)
    const directory = (): DurableObjectStub => env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(directory(), (_instance, state) => {
      expect(migrateDirectory(state.storage, [NEXT_DIRECTORY])).toBe(DIRECTORY_SCHEMA_VERSION + 1);
    });

    // Rolled back: this release's objects start again on that storage.
    await abortAllDurableObjects();
    expect((await s.input(queued.inputId)).result.status).toBe("queued");
    expect((await root.accept("after the rollback", { wait: 20 })).status).toBe("done");
    await expect.poll(async () => (await s.input(queued.inputId)).result.status).toBe("done");
    // The queued input joins the next run (one group with the new input, §8.1): each input once, each answer once.
    const items = (await root.entries({ limit: 100 })).items;
    const textsOf = (kind: string): string[] =>
      items.filter((entry) => entry.kind === kind).map((entry) => JSON.stringify(entry.model));
    for (const text of ["before the next release", "queued before the next release", "after the rollback"])
      expect(textsOf("user").filter((t) => t.includes(`"${text}"`))).toHaveLength(1);
    for (const text of ["before the next release", "after the rollback"])
      expect(textsOf("assistant").filter((t) => t.includes(`"${text}"`))).toHaveLength(1);
    // A second session in the same tenant: the directory (one version ahead) takes its row and lists both.
    const other = uniqueSession("ahead-other");
    await api.session(other).create({ model: "echo" });
    await expect
      .poll(async () => (await api.sessions({ limit: 100 })).items.map((row) => row.session).sort())
      .toEqual([session, other].sort());

    // Nothing was migrated back or forward: the storage stays at the next release's version, its rows intact.
    await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
      expect(schemaOf(state)).toEqual({ version: SCHEMA_VERSION + 1, additive: 1 });
      expect(state.storage.sql.exec("SELECT note FROM next_release_notes").toArray()).toEqual([
        { note: "written by the next release" },
      ]);
      expect(state.storage.sql.exec("SELECT count(*) AS n FROM entries WHERE next_note IS NOT NULL").one()["n"]).toBe(
        0,
      );
    });
    await runInDurableObject(directory(), (_instance, state) => {
      expect(state.storage.sql.exec("SELECT version, additive FROM directory_schema").one()).toEqual({
        version: DIRECTORY_SCHEMA_VERSION + 1,
        additive: 1,
      });
    });
    // The next release, deployed again, opens it as its own version and migrates nothing twice.
    await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
      expect(migrate(state.storage, [...MIGRATIONS, NEXT])).toBe(SCHEMA_VERSION + 1);
      expect(state.storage.sql.exec("SELECT count(*) AS n FROM next_release_notes").one()["n"]).toBe(1);
    });
    await runInDurableObject(directory(), (_instance, state) => {
      expect(migrateDirectory(state.storage, [NEXT_DIRECTORY])).toBe(DIRECTORY_SCHEMA_VERSION + 1);
    });
  });

  it("one version ahead without the additive mark, or two ahead with it, is still refused and nothing is written", async () => {
    const tenant = "upgrade-refused";
    const session = uniqueSession("refused");
    const api = await client(tenant);
    await api.session(session).create({ model: "echo" });
    const before = await lastSeq(tenant, session);
    const cases: readonly { version: number; additive: number; says: string }[] = [
      { version: SCHEMA_VERSION + 1, additive: 0, says: "and not marked additive" },
      { version: SCHEMA_VERSION + 2, additive: 1, says: "by 2 (only one additive version ahead opens)" },
    ];
    for (const { version, additive, says } of cases) {
      await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
        const host: SqlHost = state.storage;
        host.sql.exec("UPDATE session_metadata SET value = ? WHERE name = 'schema_version'", version);
        host.sql.exec(
          "INSERT INTO session_metadata (name, value) VALUES ('schema_additive', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
          additive,
        );
        let error: unknown;
        try {
          migrate(host);
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(StorageError);
        expect((error as StorageError).code).toBe("version");
        expect((error as StorageError).message).toBe(
          `session storage has schema version ${version}, newer than this code's version ${SCHEMA_VERSION} ${says}; deploy the newer code to open it`,
        );
        expect(schemaOf(state)).toEqual({ version, additive });
      });
      await abortAllDurableObjects();
      const response = await call("POST", `/v1/sessions/${session}/conversations/root/inputs`, {
        token: await token(tenant, "client"),
        body: { input: "refused" },
      });
      expect(response.status).toBe(500);
      await response.text();
    }
    // Back at this code's version, the refused requests left nothing behind.
    await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
      state.storage.sql.exec("UPDATE session_metadata SET value = ? WHERE name = 'schema_version'", SCHEMA_VERSION);
    });
    await abortAllDurableObjects();
    expect(await lastSeq(tenant, session)).toBe(before);

    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(directory, (_instance, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE directory_schema SET version = ?, additive = 0", DIRECTORY_SCHEMA_VERSION + 1);
      expect(() => migrateDirectory(state.storage)).toThrow(
        `the tenant directory's schema is version ${DIRECTORY_SCHEMA_VERSION + 1}, newer than this code's ${DIRECTORY_SCHEMA_VERSION} and not marked additive: deploy the newer code`,
      );
      sql.exec("UPDATE directory_schema SET version = ?, additive = 1", DIRECTORY_SCHEMA_VERSION + 2);
      expect(() => migrateDirectory(state.storage)).toThrow(/by 2 \(only one additive version ahead opens\)/);
      sql.exec("UPDATE directory_schema SET version = ?, additive = 0", DIRECTORY_SCHEMA_VERSION);
    });
  });

  it("every migration file says on its first line whether it is additive", () => {
    for (const m of MIGRATIONS) expect(m.sql).toMatch(/^-- additive: (yes|no)\b/);
    expect(MIGRATIONS.map((m) => [m.name, m.additive])).toEqual([
      ["0001_init", false],
      ["0002_host", true],
      ["0003_entries_by_kind", true],
      ["0004_narrow_indexes", false],
      ["0005_tasks_settled", false],
      ["0006_commit_marks", false],
      ["0007_session_elements", false],
    ]);
    expect(() => migration(99, "0099_unmarked", "CREATE TABLE x (id INTEGER);")).toThrow(/does not start with/);
  });
});
