/**
 * A session's side of its tenant's limits (docs/users.md "Limits and usage"): a commit listener that
 * reports to the tenant's LimitsObject what each durable commit settled — the model usage rows it
 * appended (tokens and cost, each keyed by its element's seq so a repeated report counts once) and the
 * inputs whose result became final (their turn slot is released). It reads nothing from the session and
 * writes nothing to it.
 *
 * A session created over RPC (no tenant), a commit with neither, and a tenant without limits (the
 * isolate's copy, limits/admission.ts) report nothing. The report is sent after the commit, not in it: one a crash
 * loses is not retried (its turn slot then expires with its lease, limits/object.ts).
 */
import type { CommittedBatch } from "../../core/session-types.js";
import { INPUT_RESULT_NAMESPACE, type InputResult } from "../../core/inbox.js";
import { readUsageRow, usageList } from "../../kinds/usage.js";
import type { StoredUsageRow } from "../../kinds/states.js";
import type { Env } from "../env.js";
import { hostReport } from "../platform/host-config.js";
import { limited, limitsOf } from "./admission.js";
import { limitsStub, type SettleReport } from "./object.js";

type Where = () => { readonly tenant: string; readonly session: string } | undefined;

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
        input: row.usage.input,
        output: row.usage.output,
        totalTokens: row.usage.totalTokens,
        cost: row.usage.cost.total,
      });
    } else if (write.type === "value.set" && write.addr.namespace === INPUT_RESULT_NAMESPACE) {
      const result = write.value as unknown as InputResult;
      if (result.status === "done" || result.status === "unanswered")
        finished.push(result.requestId === undefined ? {} : { requestId: result.requestId });
    }
  });
  return usage.length === 0 && finished.length === 0 ? undefined : { session, usage, finished };
}

/** The commit listener a session object registers (`harness.onCommit`). */
export function limitsMeter(env: Env, where: Where): (commit: CommittedBatch) => void {
  return (commit) => {
    const at = where();
    if (at === undefined) return;
    const report = settledBy(commit, at.session);
    if (report === undefined) return;
    void (async () => {
      if (!limited(await limitsOf(env, at.tenant))) return;
      await limitsStub(env, at.tenant).settle(report);
    })().catch((error: unknown) => hostReport({ type: "harness", report: error }));
  };
}
