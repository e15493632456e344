/**
 * A `SqlHost` (sql.ts) over Node's `node:sqlite` `DatabaseSync`, so `SqliteStorage` (§7.5) runs
 * unchanged outside workerd: the Node benchmarks time it with a fine clock (docs/performance.md "Time on Node"),
 * where workerd's clock advances only on I/O. Node only: never import this from worker code; it is
 * type-checked by test/node/tsconfig.json.
 *
 * Row counts differ from a Durable Object's. workerd's SQLite is patched to count, per statement, every
 * b-tree seek and step as a row read and every table and index row inserted or deleted as a row written
 * (what Cloudflare bills); `node:sqlite` exposes no statement counters. This host counts what it can
 * see: `rowsRead` = rows returned, `rowsWritten` = SQLite's `changes()` (table rows only, no index
 * rows). Both are lower bounds of the billed figures; the benchmarks take billed rows from the Durable
 * Object run and check that both runs issued the same statements (bench/turns/trace.ts).
 */
import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from "node:sqlite";
import type { SqlCursor, SqlHost, SqlRow, SqlValue } from "./sql.js";

/** Statements that change rows (their `changes()` is meaningful). */
const WRITE = /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i;

/** A view with a non-null data pointer: node:sqlite binds a view over a zero-length buffer as NULL. */
const EMPTY_BLOB = new Uint8Array(new ArrayBuffer(1), 0, 0);

function input(value: SqlValue): SQLInputValue {
  if (!(value instanceof ArrayBuffer)) return value;
  return value.byteLength === 0 ? EMPTY_BLOB : new Uint8Array(value);
}

function output(value: SQLOutputValue): SqlValue {
  if (value instanceof Uint8Array)
    return value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength) as ArrayBuffer;
  if (typeof value === "bigint") throw new RangeError(`integer ${value} is outside the safe range`);
  return value;
}

function row(raw: Record<string, SQLOutputValue>): SqlRow {
  const out: SqlRow = {};
  for (const key of Object.keys(raw)) out[key] = output(raw[key] as SQLOutputValue);
  return out;
}

/** A consumed result: `node:sqlite` runs statements to completion, so the counts are final at once. */
class NodeCursor implements SqlCursor {
  #index = 0;

  constructor(
    readonly rows: readonly SqlRow[],
    readonly rowsRead: number,
    readonly rowsWritten: number,
  ) {}

  next(): IteratorResult<SqlRow, undefined> {
    const value = this.rows[this.#index];
    if (value === undefined) return { done: true, value: undefined };
    this.#index++;
    return { done: false, value };
  }

  toArray(): SqlRow[] {
    const rest = this.rows.slice(this.#index);
    this.#index = this.rows.length;
    return rest;
  }

  one(): SqlRow {
    const rest = this.toArray();
    if (rest.length !== 1) throw new Error(`expected exactly one row, got ${rest.length}`);
    return rest[0] as SqlRow;
  }

  *raw(): IterableIterator<SqlValue[]> {
    for (const r of this.toArray()) yield Object.values(r);
  }
}

export interface NodeSqliteOptions {
  /** A file path, or ":memory:" (the default). */
  readonly path?: string;
  /** Journal mode for a file database (default WAL, as workerd's SQLite-backed objects use). */
  readonly journalMode?: "WAL" | "DELETE";
  /**
   * When a file database syncs to disk. Default "OFF": a Durable Object's durability comes from its
   * storage layer replicating the log, not from a local fsync, and a WAL checkpoint's fsyncs would time
   * this machine's disk, not the harness (they were most of SQLite's extra time on Node).
   * "NORMAL" syncs at every WAL checkpoint (SQLite's usual WAL setting).
   */
  readonly synchronous?: "OFF" | "NORMAL";
}

/** A prepared statement and what its first preparation found out about it. */
interface Prepared {
  readonly statement: StatementSync;
  /** It returns rows (a SELECT, or a write with RETURNING). */
  readonly returnsRows: boolean;
  /** It changes rows (its `changes()` is meaningful). */
  readonly writes: boolean;
}

export class NodeSqliteHost implements SqlHost {
  readonly db: DatabaseSync;
  readonly #statements = new Map<string, Prepared>();
  #depth = 0;

  constructor(options: NodeSqliteOptions = {}) {
    const path = options.path ?? ":memory:";
    this.db = new DatabaseSync(path);
    // The object is its database's only user, as a Durable Object is: exclusive locking takes the file
    // locks once instead of at every transaction.
    if (path !== ":memory:") {
      this.db.exec(
        `PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = ${options.journalMode ?? "WAL"}; PRAGMA synchronous = ${options.synchronous ?? "OFF"};`,
      );
    }
  }

  readonly sql = {
    exec: (query: string, ...bindings: SqlValue[]): SqlCursor => this.#exec(query, bindings),
  };

  /** page_count x page_size, what a Durable Object's `sql.databaseSize` reports. */
  get databaseSize(): number {
    const size = this.#prepared(
      "SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()",
    ).statement.get();
    return Number(size?.["n"] ?? 0);
  }

  transactionSync<T>(fn: () => T): T {
    const depth = this.#depth;
    const savepoint = `tx${depth}`;
    // Prepared once like every other statement (db.exec would compile BEGIN and COMMIT at every commit).
    const control = (query: string): void => void this.#prepared(query).statement.run();
    control(depth === 0 ? "BEGIN" : `SAVEPOINT ${savepoint}`);
    this.#depth++;
    try {
      const result = fn();
      control(depth === 0 ? "COMMIT" : `RELEASE ${savepoint}`);
      return result;
    } catch (error) {
      if (depth === 0) control("ROLLBACK");
      else {
        control(`ROLLBACK TO ${savepoint}`);
        control(`RELEASE ${savepoint}`);
      }
      throw error;
    } finally {
      this.#depth = depth;
    }
  }

  close(): void {
    this.db.close();
  }

  /** Each distinct SQL text is prepared once, and its shape read once (not at every execution). */
  #prepared(query: string): Prepared {
    let prepared = this.#statements.get(query);
    if (prepared === undefined) {
      const statement = this.db.prepare(query);
      prepared = { statement, returnsRows: statement.columns().length > 0, writes: WRITE.test(query) };
      this.#statements.set(query, prepared);
    }
    return prepared;
  }

  #exec(query: string, bindings: readonly SqlValue[]): SqlCursor {
    if (bindings.length === 0 && query.includes(";") && query.trim().replace(/;\s*$/, "").includes(";")) {
      // Several statements (a migration): no bindings, no rows.
      this.db.exec(query);
      return new NodeCursor([], 0, 0);
    }
    const { statement, returnsRows, writes } = this.#prepared(query);
    const args = bindings.map(input);
    if (!returnsRows) {
      const { changes } = statement.run(...args);
      return new NodeCursor([], 0, Number(changes));
    }
    const rows = statement.all(...args).map(row);
    const written = writes ? Number(this.#prepared("SELECT changes() AS n").statement.get()?.["n"] ?? 0) : 0;
    return new NodeCursor(rows, rows.length, written);
  }
}
