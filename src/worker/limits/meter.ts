/**
 * A session's side of its tenant's limits (docs/users.md "Limits and usage"): after each durable commit
 * it reports to the tenant's LimitsObject what the commit settled — the model usage rows it appended
 * (tokens and cost, each keyed by its element's seq so a repeated report counts once) and the inputs
 * whose result became final (their turn slot is released).
 *
 * Reports are durable until acknowledged: each is kept in the session object's KV storage, sent at once,
 * and deleted only when the LimitsObject answers; one that fails stays and is resent from the session's
 * alarm (backing off up to RETRY_MAX_MS), and on the next open. The LimitsObject de-duplicates usage by
 * key, so a resend counts nothing twice.
 *
 * Metering always runs: a tenant without limits is reported to as well (its usage by user, day and model is what
 * `GET /v1/usage` reads). A commit reports only when it settled something, so an input costs the reports its turn's
 * settling commits make and no call of its own. A session created over RPC (no tenant) and a commit with neither
 * report nothing.
 */
import type { CommittedBatch } from "../../core/session-types.js";
import { INPUT_RESULT_NAMESPACE, type InputResult } from "../../core/inbox.js";
import { readUsageRow, usageList } from "../../kinds/usage.js";
import type { StoredUsageRow } from "../../kinds/states.js";
import type { Env } from "../env.js";
import { hostReport } from "../platform/host-config.js";
import { limitsStub, type SettleReport } from "./object.js";

/**
 * Where the session stands: its tenant, its session key (`{session}:{incarnation}`) and the end user who owns it
 * (usage of a session no input reservation names is attributed to its owner).
 */
export type MeterWhere =
  { readonly tenant: string; readonly session: string; readonly owner: () => string | undefined } | undefined;

/** What one commit settled (pure; exported for tests). */
export function settledBy(commit: CommittedBatch, session: string): SettleReport | undefined {
  if (commit.batch.kind !== "main") return undefined;
  const usage: SettleReport["usage"][number][] = [];
  const finished: SettleReport["finished"][number][] = [];
  commit.batch.writes.forEach((write, index) => {
    if (write.type === "list.append" && write.addr.namespace === usageList.namespace) {
      const row = readUsageRow(write.value as unknown as StoredUsageRow);
      if (row.usage === null) return;
      usage.push({
        key: `${session}\n${commit.first + index}`,
        model: row.model,
        input: row.usage.input,
        output: row.usage.output,
        totalTokens: row.usage.totalTokens,
        cost: row.usage.cost.total,
      });
    } else if (write.type === "value.set" && write.addr.namespace === INPUT_RESULT_NAMESPACE) {
      const result = write.value as unknown as InputResult;
      if (result.status === "done" || result.status === "unanswered")
        finished.push({
          key: `${session}\n${commit.first + index}`,
          ...(result.requestId === undefined ? {} : { requestId: result.requestId }),
        });
    }
  });
  if (usage.length === 0 && finished.length === 0) return undefined;
  return { session, usage, finished };
}

const PREFIX = "edge.limits.report.";
export const RETRY_FIRST_MS = 1_000;
export const RETRY_MAX_MS = 60_000;

/** A report kept until the tenant's LimitsObject acknowledges it. */
interface PendingReport {
  readonly tenant: string;
  readonly report: SettleReport;
}

export interface MeterDeps {
  readonly env: Env;
  /** The session object's synchronous KV storage: pending reports live there. */
  readonly kv: SyncKvStorage;
  readonly now: () => number;
  /** When pending reports are next due (undefined: none pending): arm the alarm for it. */
  readonly due: (at: number | undefined) => void;
}

/** The session's usage reports to its tenant's limits, durable until acknowledged. */
export class LimitsMeter {
  readonly #deps: MeterDeps;
  #sending: Promise<void> | undefined;
  #attempt = 0;
  #dueAt: number | undefined;

  constructor(deps: MeterDeps) {
    this.#deps = deps;
  }

  /** When a failed report is next resent (undefined: nothing waits). */
  get dueAt(): number | undefined {
    return this.#dueAt;
  }

  /** The commit listener (`harness.onCommit`): keep what the commit settled, then send it. */
  committed(commit: CommittedBatch, at: MeterWhere): void {
    if (at === undefined) return;
    const settled = settledBy(commit, at.session);
    if (settled === undefined) return;
    // The owner is read only for a commit that reports (a KV read, not one per commit).
    const owner = at.owner();
    const report = owner === undefined ? settled : { ...settled, owner };
    const pending: PendingReport = { tenant: at.tenant, report };
    this.#deps.kv.put(`${PREFIX}${String(commit.first).padStart(16, "0")}`, pending);
    void this.flush();
  }

  /** The session opened: resend what a failure or a restart left unacknowledged. */
  opened(): void {
    if (this.#pending().length > 0) void this.flush();
  }

  /** The alarm fired: resend pending reports once due. */
  async alarm(): Promise<void> {
    if (this.#dueAt !== undefined && this.#dueAt <= this.#deps.now()) await this.flush();
  }

  /** Send every pending report in order; stop at the first failure and retry it later. One send at a time. */
  flush(): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#sending !== undefined) await this.#sending.catch(() => undefined);
      for (const [key, pending] of this.#pending()) {
        try {
          await limitsStub(this.#deps.env, pending.tenant).settle(pending.report);
        } catch (error) {
          hostReport({ type: "harness", report: error });
          const delay = Math.min(RETRY_FIRST_MS * 2 ** this.#attempt, RETRY_MAX_MS);
          this.#attempt += 1;
          this.#dueAt = this.#deps.now() + delay;
          this.#deps.due(this.#dueAt);
          return;
        }
        this.#deps.kv.delete(key);
      }
      this.#attempt = 0;
      this.#dueAt = undefined;
      this.#deps.due(undefined);
    };
    const sending = run();
    this.#sending = sending;
    return sending;
  }

  #pending(): [string, PendingReport][] {
    return [...this.#deps.kv.list<PendingReport>({ prefix: PREFIX })];
  }
}
