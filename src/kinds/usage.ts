/**
 * Usage records (§8.2): one element per attempt in the session list `pi.usage`, appended in the
 * settlement commit together with an update of the session value `pi.usage.totals`, so stats are a
 * point read and never a fold. A missing report is unknown cost, not zero: it counts in `unknown` and
 * adds no tokens. Generations record every attempt; tools record what their sink accumulated.
 * Elements are stored compact (`stored.ts`: no zero counts or costs, no sums): read them with
 * `readUsageRow`, which also reads elements written whole before.
 */
import { sessionList, sessionValue } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import type { StoredUsageRow, UsageRow, UsageTotals } from "./states.js";
import { compactUsageRow } from "./stored.js";

export { readUsageRow } from "./stored.js";

/** The stored elements; `readUsageRow` gives the full `UsageRow`. */
export const usageList = sessionList<StoredUsageRow>("pi.usage");
export const usageTotals = sessionValue<UsageTotals>("pi.usage.totals");

export function emptyTotals(): UsageTotals {
  return { attempts: 0, unknown: 0, input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: 0 };
}

/** Totals as of the writes already buffered in a builder: a builder's reads see committed state only,
 * so a second row in the same commit must add to the first row's totals, not to the committed ones. */
const pending = new WeakMap<TxBuilder, UsageTotals>();

/**
 * Append one usage row and update the totals in the same commit. Await it inside the builder: the
 * totals are read on the line before they are written.
 *
 * @example
 * await runtime.commitBuilder(async (b) => {
 *   await recordUsage(b, { conversationId, taskId, kind: "generation", model, usage: message.usage ?? null });
 *   ...
 * }, call);
 */
export async function recordUsage(b: TxBuilder, row: UsageRow): Promise<Id> {
  const base = pending.get(b) ?? (await b.value(usageTotals).get()) ?? emptyTotals();
  const next = addUsage(base, row);
  pending.set(b, next);
  const id = b.list(usageList).append(compactUsageRow(row));
  b.value(usageTotals).set(next);
  return id;
}

/** The totals after one more row (pure). */
export function addUsage(totals: UsageTotals, row: UsageRow): UsageTotals {
  const usage = row.usage;
  if (usage === null) return { ...totals, attempts: totals.attempts + 1, unknown: totals.unknown + 1 };
  return {
    attempts: totals.attempts + 1,
    unknown: totals.unknown,
    input: totals.input + usage.input,
    output: totals.output + usage.output,
    cacheRead: totals.cacheRead + usage.cacheRead,
    cacheWrite: totals.cacheWrite + usage.cacheWrite,
    totalTokens: totals.totalTokens + usage.totalTokens,
    cost: totals.cost + usage.cost.total,
  };
}
