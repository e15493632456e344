/**
 * A statement trace for the Node time bench (bench/time): wraps a `SqlHost` and folds every statement of a turn
 * window (whitespace-normalized SQL, its bindings, the number of rows it returned) into a 64-bit digest
 * (two FNV-1a lanes). The Durable Object run and the Node run of bench/turns compute it over the same windows; equal
 * digests mean both ran the same statements with the same arguments and got the same rows, so SQLite's
 * billed rows (which `node:sqlite` cannot count, see src/storage/node-sqlite.ts) are equal too.
 * Millisecond timestamps (13-digit numbers, in numbers or inside JSON text), the faux provider's random
 * api id and attempt durations are masked: the runs take them from their own clocks and random sources.
 * Runtime-agnostic (no node: or cloudflare: imports).
 */
import type { SqlCursor, SqlHost, SqlValue } from "../../src/storage/sql.js";
import type { RunFigures } from "./workload.js";

/** Clock- and randomness-derived parts of bindings: ms timestamps, the faux api's random id, durations. */
const VARYING = /\b1\d{12}\b|faux:\d+:[a-z0-9]+|"durationMs":\d+/g;
export interface TraceWindow {
  /** Two 32-bit FNV-1a lanes (different offsets), so a 64-bit digest without BigInt arithmetic. */
  a: number;
  b: number;
  statements: number;
}

/** One window of one traced SQLite run, as the JSON line carries it. */
export interface TracedWindow {
  readonly from: number;
  readonly to: number;
  readonly digest: string;
  readonly statements: number;
  /** Billed rows over the window (exact in a Durable Object; lower bounds on node:sqlite). */
  readonly rowsRead: number;
  readonly rowsWritten: number;
  /** One digest per turn of the window, to find the first turn where two runs differ. */
  readonly turns: readonly string[];
}

export interface TracedRun {
  /** Collapse threshold in estimated tokens (0: none). */
  readonly threshold: number;
  readonly collapses: number;
  readonly windows: readonly TracedWindow[];
  /** The statements (as digested) of the turn given to the trace's constructor, if any. */
  readonly dump: readonly string[];
}

/** The marker of the JSON line bench/turns prints and scripts/bench-node.ts reads. */
export const TRACE_MARKER = "BENCH_TURNS_TRACE ";

/** The JSON line of a bench/turns run: turns and each SQLite run's windows. */
export function traceRuns(turns: number, runs: readonly TracedRun[]): string {
  return `${TRACE_MARKER}${JSON.stringify({ turns, runs })}`;
}

export class StatementTrace {
  /** The window statements are folded into; undefined: not recorded. */
  current: TraceWindow | undefined;
  readonly #ranges: readonly (readonly [number, number])[];
  readonly #windows: TraceWindow[];
  readonly #turnDigests: string[][];
  #turn: TraceWindow = empty();
  readonly #dumpTurn: number | undefined;
  #dumping = false;
  readonly #dump: string[] = [];

  /** `dumpTurn`: also keep the statements of this turn (diagnosis of a digest mismatch). */
  constructor(ranges: readonly (readonly [number, number])[], dumpTurn?: number) {
    this.#ranges = ranges;
    this.#windows = ranges.map(empty);
    this.#turnDigests = ranges.map(() => []);
    this.#dumpTurn = dumpTurn;
  }

  /** The workload's `around` hook: record the statements of turns inside a window. */
  around(turn: number, phase: "before" | "after"): void {
    const index = this.#ranges.findIndex(([from, to]) => turn >= from && turn <= to);
    if (phase === "after" && index >= 0) this.#turnDigests[index]?.push(hex(this.#turn));
    this.#turn = empty();
    this.#dumping = phase === "before" && turn === this.#dumpTurn;
    this.current = phase === "before" && index >= 0 ? this.#windows[index] : undefined;
  }

  /** The digests with the run's window rows. */
  result(threshold: number, figures: RunFigures): TracedRun {
    return {
      threshold,
      collapses: figures.collapses,
      windows: this.#ranges.map(([from, to], i) => {
        const w = figures.windows.find((f) => f.from === from && f.to === to);
        const t = this.#windows[i] as TraceWindow;
        return {
          from,
          to,
          digest: hex(t),
          statements: t.statements,
          rowsRead: w?.rowsRead ?? 0,
          rowsWritten: w?.rowsWritten ?? 0,
          turns: this.#turnDigests[i] ?? [],
        };
      }),
      dump: this.#dump,
    };
  }

  /** `host` with every statement recorded into `current` while it is set. */
  wrap(host: SqlHost): SqlHost {
    return {
      sql: {
        exec: (query: string, ...bindings: SqlValue[]): SqlCursor => {
          const cursor = host.sql.exec(query, ...bindings);
          const window = this.current;
          if (window === undefined) return cursor;
          const rows = cursor.toArray();
          const text = `${query.replace(/\s+/g, " ").trim()}\u0000${bindings.map(binding).join("\u0001")}\u0000${rows.length}`;
          fold(window, text);
          fold(this.#turn, text);
          window.statements++;
          if (this.#dumping)
            this.#dump.push(`${text.replace(/[\u0000\u0001]/g, " | ")} [r${cursor.rowsRead} w${cursor.rowsWritten}]`);
          return replay(cursor, rows);
        },
      },
      transactionSync: <T>(fn: () => T): T => host.transactionSync(fn),
    };
  }
}

function empty(): TraceWindow {
  return { a: 0x811c9dc5, b: 0x050c5d1f, statements: 0 };
}

/** Hex of a window's digest. */
export function hex(window: TraceWindow): string {
  return `${(window.a >>> 0).toString(16).padStart(8, "0")}${(window.b >>> 0).toString(16).padStart(8, "0")}`;
}

function binding(value: SqlValue): string {
  if (value instanceof ArrayBuffer) return `b${[...new Uint8Array(value)].join(",")}`;
  if (value === null) return "n";
  return `${typeof value === "number" ? "i" : "s"}${String(value).replace(VARYING, "~")}`;
}

function fold(window: TraceWindow, text: string): void {
  let a = window.a;
  let b = window.b;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c ^ (i & 0xff), 0x01000193);
  }
  window.a = a;
  window.b = b;
}

/** A cursor over rows already consumed, keeping the original's row counts (final once consumed). */
function replay(cursor: SqlCursor, rows: ReturnType<SqlCursor["toArray"]>): SqlCursor {
  let index = 0;
  const rest = (): ReturnType<SqlCursor["toArray"]> => {
    const out = rows.slice(index);
    index = rows.length;
    return out;
  };
  return {
    next: () => {
      const value = rows[index];
      if (value === undefined) return { done: true, value: undefined };
      index++;
      return { done: false, value };
    },
    toArray: rest,
    one: () => {
      const out = rest();
      if (out.length !== 1) throw new Error(`expected exactly one row, got ${out.length}`);
      return out[0] as ReturnType<SqlCursor["one"]>;
    },
    *raw() {
      for (const r of rest()) yield Object.values(r);
    },
    get rowsRead() {
      return cursor.rowsRead;
    },
    get rowsWritten() {
      return cursor.rowsWritten;
    },
  };
}
