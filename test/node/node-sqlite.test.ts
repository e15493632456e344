/**
 * `NodeSqliteHost` (src/storage/node-sqlite.ts), the Node host the time bench (bench/time) runs
 * `SqliteStorage` on: how it configures a file database (like a Durable Object's: one user, WAL, no
 * local fsync unless asked) and what its cursors report.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { NodeSqliteHost } from "../../src/storage/node-sqlite.js";

const dirs: string[] = [];
const hosts: NodeSqliteHost[] = [];

afterEach(() => {
  for (const host of hosts.splice(0)) host.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function fileHost(options: { synchronous?: "OFF" | "NORMAL" } = {}): NodeSqliteHost {
  const dir = mkdtempSync(join(tmpdir(), "pico-node-sqlite-"));
  dirs.push(dir);
  const host = new NodeSqliteHost({ path: join(dir, "session.sqlite"), ...options });
  hosts.push(host);
  return host;
}

const pragma = (host: NodeSqliteHost, name: string): unknown => Object.values(host.sql.exec(`PRAGMA ${name}`).one())[0];

describe("NodeSqliteHost", () => {
  it("a file database runs in WAL mode with exclusive locking and synchronous OFF by default (node:sqlite)", () => {
    const host = fileHost();
    expect(pragma(host, "journal_mode")).toBe("wal");
    expect(pragma(host, "locking_mode")).toBe("exclusive");
    expect(pragma(host, "synchronous")).toBe(0);
  });

  it("synchronous NORMAL on request syncs at WAL checkpoints (node:sqlite)", () => {
    expect(pragma(fileHost({ synchronous: "NORMAL" }), "synchronous")).toBe(1);
  });

  it("transactionSync commits, rolls back on a throw, and nests as savepoints whose rollback keeps the outer work (node:sqlite)", () => {
    const host = fileHost();
    host.sql.exec("CREATE TABLE t (v TEXT)");
    const values = (): unknown[] =>
      host.sql
        .exec("SELECT v FROM t ORDER BY rowid")
        .toArray()
        .map((r) => r["v"]);
    for (let round = 0; round < 2; round++) {
      host.transactionSync(() => host.sql.exec("INSERT INTO t (v) VALUES (?)", `kept${round}`));
      expect(() =>
        host.transactionSync(() => {
          host.sql.exec("INSERT INTO t (v) VALUES (?)", "dropped");
          throw new Error("boom");
        }),
      ).toThrow("boom");
      host.transactionSync(() => {
        host.sql.exec("INSERT INTO t (v) VALUES (?)", `outer${round}`);
        expect(() =>
          host.transactionSync(() => {
            host.sql.exec("INSERT INTO t (v) VALUES (?)", "inner");
            throw new Error("inner boom");
          }),
        ).toThrow("inner boom");
      });
    }
    expect(values()).toEqual(["kept0", "outer0", "kept1", "outer1"]);
  });

  it("counts rows returned and changed per statement, RETURNING included, with every statement reusable (node:sqlite)", () => {
    const host = fileHost();
    host.sql.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
    for (let round = 0; round < 2; round++) {
      const inserted = host.transactionSync(() =>
        host.sql.exec("INSERT INTO t (v) VALUES (?), (?) RETURNING id", `a${round}`, `b${round}`),
      );
      expect([inserted.rowsRead, inserted.rowsWritten]).toEqual([2, 2]);
      const updated = host.sql.exec("UPDATE t SET v = v || ? WHERE v LIKE ?", "!", `%${round}`);
      expect([updated.rowsRead, updated.rowsWritten]).toEqual([0, 2]);
      const read = host.sql.exec("SELECT v FROM t WHERE v LIKE ? ORDER BY id", `%${round}!`);
      expect(read.toArray()).toEqual([{ v: `a${round}!` }, { v: `b${round}!` }]);
      expect([read.rowsRead, read.rowsWritten]).toEqual([2, 0]);
    }
  });
});
