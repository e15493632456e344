/**
 * Counted SQL for `SqliteStorage` and its state store: every statement goes through here so the rows
 * read and written (what Cloudflare bills, docs/performance.md) accumulate in one `stats` object that tests and
 * benchmarks diff around a call. Cursors are always consumed whole, so the counts are final.
 */
import type { Id } from "./records.js";
import { MAX_BOUND_PARAMETERS, type SqlHost, type SqlRow, type SqlValue } from "./sql.js";
import { StorageError } from "./storage.js";

export interface SqlStats {
  rowsRead: number;
  rowsWritten: number;
}

/** One statement's totals in a profile: how often it ran and the rows it read and wrote. */
export interface StatementProfile {
  readonly statement: string;
  executions: number;
  rowsRead: number;
  rowsWritten: number;
}

export class CountedSql {
  /** Monotonically increasing totals over every statement run through this object. */
  readonly stats: SqlStats = { rowsRead: 0, rowsWritten: 0 };
  /** Per-statement totals while profiling (`profile()` starts a fresh one); undefined otherwise. */
  #profile: Map<string, StatementProfile> | undefined;

  constructor(readonly host: SqlHost) {}

  /** Start recording per-statement totals (replacing any earlier profile); returns the live map. */
  profile(): ReadonlyMap<string, StatementProfile> {
    this.#profile = new Map();
    return this.#profile;
  }

  /** Stop recording per-statement totals. */
  stopProfile(): void {
    this.#profile = undefined;
  }

  /** All rows of one statement. */
  rows(query: string, ...bindings: SqlValue[]): SqlRow[] {
    const cursor = this.host.sql.exec(query, ...bindings);
    const rows = cursor.toArray();
    this.#count(query, cursor.rowsRead, cursor.rowsWritten);
    return rows;
  }

  #count(query: string, read: number, written: number): void {
    this.stats.rowsRead += read;
    this.stats.rowsWritten += written;
    if (this.#profile === undefined) return;
    const statement = query.replace(/\s+/g, " ").trim();
    let p = this.#profile.get(statement);
    if (p === undefined) {
      p = { statement, executions: 0, rowsRead: 0, rowsWritten: 0 };
      this.#profile.set(statement, p);
    }
    p.executions += 1;
    p.rowsRead += read;
    p.rowsWritten += written;
  }

  /** The first row, if any (queries that can match more say LIMIT 1). */
  first(query: string, ...bindings: SqlValue[]): SqlRow | undefined {
    return this.rows(query, ...bindings)[0];
  }

  /** Run a write; returns the rows it wrote (index rows included, as Cloudflare counts them). */
  run(query: string, ...bindings: SqlValue[]): number {
    const cursor = this.host.sql.exec(query, ...bindings);
    cursor.toArray();
    this.#count(query, cursor.rowsRead, cursor.rowsWritten);
    return cursor.rowsWritten;
  }
}

/** Id lists split so no statement binds more than the platform's 100 parameters. */
export function chunks<T>(items: readonly T[], size: number = MAX_BOUND_PARAMETERS - 10): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** "?, ?, ?" for an IN list. */
export function placeholders(n: number): string {
  return Array.from({ length: n }, () => "?").join(", ");
}

/** Distinct ids that can name a stored row (positive safe integers); anything else can't match. */
export function storableIds(ids: readonly Id[]): Id[] {
  return [...new Set(ids)].filter((id) => Number.isSafeInteger(id) && id > 0);
}

export function int(row: SqlRow, column: string): number {
  const value = row[column];
  if (typeof value !== "number") throw new StorageError("corrupt", `column ${column} is not an integer`);
  return value;
}

export function text(row: SqlRow, column: string): string {
  const value = row[column];
  if (typeof value !== "string") throw new StorageError("corrupt", `column ${column} is not text`);
  return value;
}

export function optionalInt(row: SqlRow, column: string): number | undefined {
  const value = row[column];
  return value === null || value === undefined ? undefined : int(row, column);
}

export function optionalText(row: SqlRow, column: string): string | undefined {
  const value = row[column];
  return value === null || value === undefined ? undefined : text(row, column);
}

/** A non-negative integer position (at, from, through), else bad_query: it may be inlined into SQL. */
export function checkPosition(name: string, value: Id | undefined): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new StorageError("bad_query", `${name} must be a non-negative integer, got ${String(value)}`);
  }
}
