/**
 * The session host's durable bookkeeping (migrations/0002_host.sql): consecutive-kill counters that
 * quarantine a task which keeps killing the object, and the session fault record that stops alarms from
 * auto-driving a faulted session (docs/operations.md). Used by SessionHost (the driver's DriverHost) and the
 * SessionObject's operator operations.
 *
 * Every method is synchronous SQL on `ctx.storage.sql`, called on the commit line before an invocation
 * is dispatched. That is what makes a counter durable before the invocation's first external effect: a
 * Durable Object's output gate holds every outgoing message (a model `fetch`, an RPC reply) until the
 * writes made before it are confirmed durable, so no effect of the invocation can escape ahead of its
 * counter. If the object dies before the write is durable, nothing of the invocation escaped either.
 */
import type { Id } from "../../storage/records.js";
import type { SqlHost } from "../../storage/sql.js";
import type { FaultReport, InvocationMethod } from "../../core/host.js";
import type { FaultRecord, KillCount } from "../../api/responses.js";

export type { FaultRecord, KillCount } from "../../api/responses.js";

/** The decision before an execute/recover starts. */
export type StartDecision =
  { readonly type: "start"; readonly kills: number } | { readonly type: "quarantined"; readonly kills: number };

const METHODS: ReadonlySet<string> = new Set<InvocationMethod>(["execute", "recover", "abort"]);

export class HostBook {
  readonly #host: SqlHost;
  readonly #bound: number;

  /** `bound`: consecutive kills under one version after which no execute/recover starts. */
  constructor(host: SqlHost, bound: number) {
    this.#host = host;
    this.#bound = bound;
  }

  get bound(): number {
    return this.#bound;
  }

  /**
   * Before an execute/recover of `taskId` starts under `version`: raise its counter and start, or refuse
   * when the kills counted under this version reached the bound. Kills counted under another version do
   * not count (a deploy kills in-flight work without it being the task's fault): the count restarts.
   * One indexed read and, when starting, one written row.
   */
  beforeStart(taskId: Id, version: string, parked = false): StartDecision {
    const row = this.#host.sql.exec("SELECT kills, version FROM host_kills WHERE task = ?", taskId).toArray()[0];
    const counted = row !== undefined && row["version"] === version ? Number(row["kills"]) : 0;
    if (counted >= this.#bound) return { type: "quarantined", kills: counted };
    // Starting parked in a declared sleep is not working: nothing to count until it wakes (`woke`).
    if (parked) return { type: "start", kills: counted };
    this.#host.sql.exec(
      "INSERT INTO host_kills (task, kills, version) VALUES (?, ?, ?) ON CONFLICT (task) DO UPDATE SET kills = excluded.kills, version = excluded.version",
      taskId,
      counted + 1,
      version,
    );
    return { type: "start", kills: counted + 1 };
  }

  /**
   * The invocation of `taskId` parked in a declared wait: the working stretch it ends was not killed.
   * A stretch that began at a wake went round a whole wait cycle alive, so the count resets; the first
   * stretch of an invocation only withdraws its own count and keeps the kills before it (a task that
   * dies in the work after every wake is still quarantined). One written row at most.
   */
  parked(taskId: Id, reset: boolean): void {
    if (reset) {
      this.returned(taskId);
      return;
    }
    this.#host.sql.exec("DELETE FROM host_kills WHERE task = ? AND kills <= 1", taskId);
    this.#host.sql.exec("UPDATE host_kills SET kills = kills - 1 WHERE task = ? AND kills > 1", taskId);
  }

  /** The invocation of `taskId` woke from a declared wait and works again: count it, as a start is. */
  woke(taskId: Id, version: string): void {
    this.#host.sql.exec(
      "INSERT INTO host_kills (task, kills, version) VALUES (?, 1, ?) ON CONFLICT (task) DO UPDATE SET kills = CASE WHEN host_kills.version = excluded.version THEN host_kills.kills + 1 ELSE 1 END, version = excluded.version",
      taskId,
      version,
    );
  }

  /** An invocation of `taskId` returned (or threw): it was not killed, so the count resets. */
  returned(taskId: Id): void {
    this.#host.sql.exec("DELETE FROM host_kills WHERE task = ?", taskId);
  }

  /** An operator releases a quarantined task: it gets a fresh count. */
  release(taskId: Id): void {
    this.returned(taskId);
  }

  /** Every counted task, for inspection (rows exist only for tasks whose last invocation did not return). */
  kills(): KillCount[] {
    return this.#host.sql
      .exec("SELECT task, kills, version FROM host_kills ORDER BY task")
      .toArray()
      .map((row) => ({ taskId: Number(row["task"]), kills: Number(row["kills"]), version: String(row["version"]) }));
  }

  /** Tasks whose count under `version` reached the bound. */
  quarantined(version: string): Id[] {
    return this.#host.sql
      .exec("SELECT task FROM host_kills WHERE version = ? AND kills >= ? ORDER BY task", version, this.#bound)
      .toArray()
      .map((row) => Number(row["task"]));
  }

  recordFault(report: FaultReport, at: number): void {
    this.#host.sql.exec(
      "INSERT INTO host_fault (id, at, task, kind, method, message) VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at, task = excluded.task, kind = excluded.kind, method = excluded.method, message = excluded.message",
      at,
      report.taskId ?? null,
      report.kind ?? null,
      report.method ?? null,
      report.message,
    );
  }

  fault(): FaultRecord | undefined {
    const row = this.#host.sql.exec("SELECT at, task, kind, method, message FROM host_fault WHERE id = 1").toArray()[0];
    if (row === undefined) return undefined;
    const task = row["task"];
    const kind = row["kind"];
    const method = row["method"];
    return {
      at: Number(row["at"]),
      ...(typeof task === "number" ? { taskId: task } : {}),
      ...(typeof kind === "string" ? { kind } : {}),
      ...(typeof method === "string" && METHODS.has(method) ? { method: method as InvocationMethod } : {}),
      message: String(row["message"]),
    };
  }

  /** Returns whether there was a fault to clear. */
  clearFault(): boolean {
    const had = this.fault() !== undefined;
    if (had) this.#host.sql.exec("DELETE FROM host_fault WHERE id = 1");
    return had;
  }
}
