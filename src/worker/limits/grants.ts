/**
 * Lease grants and their acknowledgments (docs/users.md "Limits and usage"; limits/lease.ts GRANT_ACK_MS). The tenant's
 * object remembers each grant under its lease call's key (the Pool's `pool_grants`) and takes back the units of one no
 * shard acknowledged in time (the shard was killed before it recorded them); a shard keeps the grants it recorded in
 * `lease_acks` until their acknowledgment, carried by its next forward or lease call, is answered. Used by the
 * LimitsObject (limits/object.ts) in both roles: `answerLease` and `answerForward` on the tenant's object, `GrantAcks`
 * on a shard.
 */
import type { GrantPart, Held, LeaseAnswer, LeaseAsk, LeaseKind, Pool, TenantTotals } from "./lease.js";

/**
 * The tenant's answer to a batch that carried acknowledgments (a batch without them is answered as before: the totals
 * when asked, else nothing): the totals when asked, and which grants were still the shard's or had been taken back.
 */
export interface ForwardAcked {
  readonly type: "acked";
  readonly totals?: TenantTotals;
  readonly acked?: readonly string[];
  readonly lost?: readonly string[];
}

/** What the tenant's object answered of a shard's acknowledgments (a lease call's answer or a forward's). */
interface AckAnswer {
  readonly acked?: readonly string[];
  readonly lost?: readonly string[];
}

/** The units of what was granted of each ask (an ask granted nothing has none). */
export function grantParts(
  asks: readonly { readonly kind: LeaseKind; readonly period: string }[],
  granted: readonly number[],
): GrantPart[] {
  return asks.flatMap((ask, i) =>
    (granted[i] ?? 0) > 0 ? [{ kind: ask.kind, period: ask.period, count: granted[i] ?? 0 }] : [],
  );
}

/**
 * The tenant's object answers a lease call (LimitsObject `lease`): `id` the call's key (a retry under it is answered
 * what it granted, and nothing more), `acks` the keys of grants the shard recorded since; `totals` reads the tenant's
 * totals when the answer is made.
 */
export function answerLease(
  pool: Pool,
  call: {
    readonly shard: string;
    readonly asks: readonly LeaseAsk[];
    readonly id: string | undefined;
    readonly acks: readonly string[];
  },
  totals: () => TenantTotals,
  now: number,
): LeaseAnswer {
  const { shard, asks, id } = call;
  // Acknowledgments first (a grant acknowledged in this call is not taken back), then what nobody acknowledged.
  const { acked, lost } = pool.acknowledge(shard, call.acks);
  pool.reclaim(now);
  const answered = (granted: readonly number[]): LeaseAnswer => ({
    granted,
    totals: totals(),
    ...(acked.length === 0 ? {} : { acked }),
    ...(lost.length === 0 ? {} : { lost }),
  });
  const before = id === undefined ? undefined : pool.granted(shard, id);
  if (before !== undefined) return answered(before);
  const granted = asks.map((ask) => pool.lease(shard, ask.kind, ask.period, ask.want, ask.limit, now));
  if (id !== undefined) pool.remember(shard, id, grantParts(asks, granted), granted, now);
  return answered(granted);
}

/**
 * The tenant's object answers a forwarded batch (LimitsObject `forward`): the totals when asked; with `acks` (what
 * Pool.acknowledge made of the batch's acknowledgments, undefined when it carried none), a ForwardAcked.
 */
export function answerForward(
  totals: TenantTotals | undefined,
  acks: { readonly acked: readonly string[]; readonly lost: readonly string[] } | undefined,
): TenantTotals | ForwardAcked | undefined {
  if (acks === undefined) return totals;
  return {
    type: "acked",
    ...(totals === undefined ? {} : { totals }),
    ...(acks.acked.length === 0 ? {} : { acked: acks.acked }),
    ...(acks.lost.length === 0 ? {} : { lost: acks.lost }),
  };
}

/** A shard's grants recorded and not yet acknowledged to the tenant's object (its own storage: `lease_acks`). */
export class GrantAcks {
  readonly #sql: SqlStorage;
  readonly #held: Held;

  constructor(sql: SqlStorage, held: Held) {
    this.#sql = sql;
    this.#held = held;
    sql.exec("CREATE TABLE IF NOT EXISTS lease_acks (id TEXT PRIMARY KEY, parts TEXT NOT NULL)");
  }

  /** The keys of grants this shard recorded and the tenant's object has not answered the acknowledgment of. */
  ids(): string[] {
    return this.#sql
      .exec("SELECT id FROM lease_acks")
      .toArray()
      .map((row) => String(row["id"]));
  }

  /** Whether an acknowledgment waits to be answered (the shard's alarm stays armed for it). */
  pending(): boolean {
    return this.#sql.exec("SELECT 1 AS found FROM lease_acks LIMIT 1").toArray().length > 0;
  }

  /** Record the grant of the lease call `id` (whether there was one: nothing granted, nothing to acknowledge). */
  record(id: string, parts: readonly GrantPart[]): boolean {
    if (parts.length === 0) return false;
    this.#sql.exec("INSERT INTO lease_acks (id, parts) VALUES (?, ?)", id, JSON.stringify(parts));
    return true;
  }

  /**
   * The tenant's object answered acknowledgments: those it knew are done; a grant it had taken back (this shard took
   * longer than GRANT_ACK_MS to acknowledge it) loses the units this shard still holds unused.
   */
  answered(answer: AckAnswer): void {
    const sql = this.#sql;
    for (const id of answer.acked ?? []) sql.exec("DELETE FROM lease_acks WHERE id = ?", id);
    for (const id of answer.lost ?? []) {
      const row = sql.exec("DELETE FROM lease_acks WHERE id = ? RETURNING parts", id).toArray()[0];
      if (row === undefined) continue;
      for (const part of JSON.parse(String(row["parts"])) as GrantPart[])
        this.#held.revoke(part.kind, part.period, part.count);
    }
  }

  /** A forward was answered: its acknowledgments (a ForwardAcked) are done; the tenant's totals when it sent them. */
  forwarded(answer: TenantTotals | ForwardAcked | undefined): TenantTotals | undefined {
    if (answer === undefined || !("type" in answer)) return answer;
    this.answered(answer);
    return answer.totals;
  }
}
