/**
 * The minimal synchronous SQL surface `SqliteStorage` runs on. A Durable Object's `ctx.storage`
 * satisfies it structurally (checked by the workerd tests, which pass `state.storage` where a `SqlHost`
 * is expected), so this module imports no Cloudflare types and the storage layer stays runtime-agnostic.
 */

/** A value SQLite binds or returns: Durable Object SQL has no bigint or boolean. */
export type SqlValue = ArrayBuffer | string | number | null;

export type SqlRow = Record<string, SqlValue>;

/** The result of one `exec`. Row counts are what Cloudflare bills; they grow as the cursor is consumed. */
export interface SqlCursor {
  next(): IteratorResult<SqlRow, undefined>;
  toArray(): SqlRow[];
  one(): SqlRow;
  raw(): IterableIterator<SqlValue[]>;
  readonly rowsRead: number;
  readonly rowsWritten: number;
}

export interface SqlHost {
  readonly sql: {
    /** Run one statement, or several separated by semicolons when there are no bindings (migrations). */
    exec(query: string, ...bindings: SqlValue[]): SqlCursor;
  };
  /** Run `fn` in one transaction: committed when it returns, rolled back whole when it throws. */
  transactionSync<T>(fn: () => T): T;
}

/** Durable Object SQLite refuses statements with more than this many bound parameters. */
export const MAX_BOUND_PARAMETERS = 100;
