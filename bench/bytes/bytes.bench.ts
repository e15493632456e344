/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * Database bytes per turn (docs/performance.md "Cost per turn"): where the bytes of the §10.3 many-short-turns workload
 * (bench/turns/workload.ts) go on SQLite inside a Durable Object (§7.5 tables). Runs N turns (default
 * 200, `--turns N`) without collapse, then prints per table and index: rows, the summed length() of
 * each column (payload bytes), an estimate of each index's key bytes, and pages from SQLite's `dbstat`
 * when the runtime offers it; then the JSON columns (entries.data/model, tasks.state, values, list
 * elements, session elements, scratch) split by entry kind / task kind / namespace and by top-level JSON key, in bytes
 * per turn,
 * and the last turn's rows as stored.
 * Prints figures only; asserts nothing about sizes.
 *
 * Run: npm run bench:bytes [-- --turns N]
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, inject, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { openWorkload, type Workload } from "../turns/workload.js";

declare module "vitest" {
  export interface ProvidedContext {
    benchTurns: number;
  }
}

const TURNS = inject("benchTurns");
const SLICE = 250;

type Row = Record<string, SqlStorageValue>;

/** Bytes of a value in a SQLite record body (an integer takes 0-8 bytes by magnitude, a real 8). */
function size(v: SqlStorageValue): number {
  if (v === null) return 0;
  if (typeof v === "string") return new TextEncoder().encode(v).length;
  if (typeof v === "number") {
    if (!Number.isInteger(v)) return 8;
    const a = Math.abs(v);
    return a <= 1 ? 0 : a < 128 ? 1 : a < 32_768 ? 2 : a < 8_388_608 ? 3 : a < 2 ** 31 ? 4 : a < 2 ** 47 ? 6 : 8;
  }
  return v.byteLength;
}

/** Adds `n` to `map[key]`. */
function add(map: Map<string, number>, key: string, n: number): void {
  map.set(key, (map.get(key) ?? 0) + n);
}

function table(title: string, map: ReadonlyMap<string, number>, per: number): string[] {
  const total = [...map.values()].reduce((a, b) => a + b, 0);
  const lines = [`\n${title} (bytes per turn; total ${(total / per).toFixed(0)})`];
  for (const [k, v] of [...map].sort((a, b) => b[1] - a[1])) lines.push(`${(v / per).toFixed(1).padStart(9)}  ${k}`);
  return lines;
}

it(`bench/bytes: where the database bytes of ${TURNS} faux turns go (SQLite in a Durable Object)`, async () => {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-bytes-${Date.now()}`));
  let workload: Workload | undefined;
  for (let from = 1; from <= TURNS; from += SLICE) {
    await runInDurableObject(stub, async (_instance, state) => {
      workload ??= await openWorkload(SqliteStorage.open(state.storage), {
        label: "sqlite (DO), no collapse",
        turns: TURNS,
        windows: [],
        now: () => performance.now(),
        dbBytes: () => state.storage.sql.databaseSize,
      });
      await workload.run(from, Math.min(TURNS, from + SLICE - 1));
    });
  }
  await runInDurableObject(stub, async (_instance, state) => {
    const sql = state.storage.sql;
    const q = (s: string): Row[] => sql.exec(s).toArray();
    const lines: string[] = [
      `\nbench/bytes — ${TURNS} turns; databaseSize ${sql.databaseSize} bytes = ${(sql.databaseSize / TURNS).toFixed(0)} per turn`,
    ];
    // Pages per b-tree, when the runtime's SQLite has the dbstat virtual table.
    try {
      const pages = q(
        "SELECT name, count(*) AS pages, sum(pgsize) AS bytes, sum(payload) AS payload, sum(unused) AS unused FROM dbstat GROUP BY name ORDER BY bytes DESC",
      );
      lines.push("dbstat: b-tree, pages, bytes/turn, payload/turn, unused/turn");
      for (const p of pages)
        lines.push(
          `  ${String(p["name"]).padEnd(28)} ${String(p["pages"]).padStart(6)} ${(Number(p["bytes"]) / TURNS).toFixed(0).padStart(7)} ${(Number(p["payload"]) / TURNS).toFixed(0).padStart(7)} ${(Number(p["unused"]) / TURNS).toFixed(0).padStart(7)}`,
        );
    } catch (e) {
      lines.push(`dbstat not available (${e instanceof Error ? e.message : String(e)}): payload sums only`);
    }
    const master = q(
      "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY tbl_name, type DESC, name",
    );
    lines.push(
      "payload: table or index, rows, bytes/turn (sum of length() of its columns; an index: its key columns + rowid)",
    );
    const columnBytes = new Map<string, number>();
    for (const m of master) {
      const name = String(m["name"]);
      if (m["type"] === "table") {
        const cols = q(`PRAGMA table_info("${name}")`).map((c) => String(c["name"]));
        const rows = q(`SELECT * FROM "${name}"`);
        let bytes = 0;
        for (const r of rows)
          for (const c of cols) {
            const n = size(r[c] ?? null);
            bytes += n;
            add(columnBytes, `${name}.${c}`, n);
          }
        lines.push(
          `  table ${name.padEnd(26)} ${String(rows.length).padStart(7)} rows ${(bytes / TURNS).toFixed(0).padStart(7)}`,
        );
      } else if (m["type"] === "index") {
        const cols = q(`PRAGMA index_info("${name}")`).map((c) => String(c["name"]));
        const where = /\bWHERE\b(.*)$/is.exec(String(m["sql"] ?? ""))?.[1];
        const rows = q(
          `SELECT ${cols.map((c) => `"${c}"`).join(", ")} FROM "${String(m["tbl_name"])}"${where === undefined ? "" : ` WHERE ${where}`}`,
        );
        let bytes = 0;
        for (const r of rows) {
          bytes += 8;
          for (const c of cols) bytes += size(r[c] ?? null);
        }
        lines.push(
          `  index ${name.padEnd(26)} ${String(rows.length).padStart(7)} rows ${(bytes / TURNS).toFixed(0).padStart(7)}`,
        );
      }
    }
    lines.push(...table("columns", new Map([...columnBytes].filter(([, v]) => v / TURNS >= 1)), TURNS));
    // JSON columns split by what they hold and by top-level key.
    const kinds = new Map(q("SELECT id, name FROM kinds").map((k) => [Number(k["id"]), String(k["name"])]));
    const byKey = new Map<string, number>();
    const json = (label: string, text: SqlStorageValue): void => {
      if (typeof text !== "string") return;
      add(byKey, `${label} (whole)`, size(text));
      // A compacted entries.model or tasks.state column starts with "~" (src/storage/sqlite-codec.ts); its JSON
      // follows.
      const value: unknown = JSON.parse(text.startsWith("~") ? text.slice(1) : text);
      if (typeof value !== "object" || value === null || Array.isArray(value)) return;
      for (const [k, v] of Object.entries(value))
        add(byKey, `${label} .${k}`, size(JSON.stringify(k)) + size(JSON.stringify(v)) + 2);
    };
    for (const e of q("SELECT kind, data, model FROM entries")) {
      const kind = kinds.get(Number(e["kind"])) ?? "?";
      json(`entries.data [${kind}]`, e["data"] ?? null);
      json(`entries.model [${kind}]`, e["model"] ?? null);
    }
    for (const t of q("SELECT kind, status, state FROM tasks"))
      json(`tasks.state [${String(t["kind"])} ${String(t["status"])}]`, t["state"] ?? null);
    // Every state table (values, list elements, session elements, scratch): by namespace.
    for (const m of master) {
      const name = String(m["name"]);
      if (m["type"] !== "table") continue;
      const cols = q(`PRAGMA table_info("${name}")`).map((c) => String(c["name"]));
      if (!cols.includes("namespace") || !cols.includes("value")) continue;
      for (const v of q(`SELECT namespace, value FROM "${name}"`))
        json(`${name}.value [${String(v["namespace"])}]`, v["value"] ?? null);
    }
    lines.push(
      ...table(
        "JSON columns by kind / namespace and top-level key",
        new Map([...byKey].filter(([, v]) => v / TURNS >= 0.5)),
        TURNS,
      ),
    );
    {
      lines.push("\nthe newest rows as stored (the last turn):");
      for (const e of q("SELECT * FROM entries ORDER BY id DESC LIMIT 5")) lines.push(`entry ${JSON.stringify(e)}`);
      for (const t of q("SELECT * FROM tasks ORDER BY id DESC LIMIT 5")) lines.push(`task ${JSON.stringify(t)}`);
      for (const t of q("SELECT * FROM list_elements ORDER BY id DESC LIMIT 3"))
        lines.push(`list ${JSON.stringify(t)}`);
      for (const t of q(`SELECT * FROM "values" ORDER BY seq DESC LIMIT 4`)) lines.push(`value ${JSON.stringify(t)}`);
    }
    console.log(lines.join("\n"));
  });
  expect(workload?.figures.turns).toBe(TURNS);
}, 900_000);
