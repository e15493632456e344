/**
 * GitHub replays (docs/integrations.md "Redeliveries"). GitHub signs the body but not `X-GitHub-Delivery`, so a
 * captured delivery posted again under a new delivery id would pass the delivery-id check (the request key) as a new
 * input. The accepting commit therefore also records the delivery's `X-Hub-Signature-256` per endpoint for
 * REPLAY_WINDOW_MS, and a delivery whose signature is recorded and unexpired is a duplicate of the input it was
 * first accepted as. GitHub signs no timestamp, so nothing bounds a replay older than the window: it is not caught.
 *
 * Two session values per signature, written in the accepting commit: the record (`edge.replay`, keyed by
 * `{endpoint}:{signature}`; an endpoint name holds no ":") and its place in expiry order (`edge.replay-expiry`, keyed
 * by the zero-padded expiry and the record's key, so a key scan is oldest first). Expired signatures are pruned, at
 * most PRUNE_BATCH per accepting commit, and by the object's alarm, which is set for the oldest expiry so the
 * table empties without traffic. Used by the accept operation (session/input-ops.ts) and the SessionObject's alarm.
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { Harness } from "../../core/harness.js";
import type { Clock } from "../../core/host.js";
import { sessionValue, withKey, type ValueRef, type ValueSpec } from "../../core/state.js";
import type { ValueTx } from "../../core/tx-builder.js";
import type { Storage } from "../../storage/storage.js";
import type { Id } from "../../storage/records.js";

/** The key namespace of the recorded signatures. */
export const REPLAY_NAMESPACE = "edge.replay";
/** The expiry order of the recorded signatures. */
const EXPIRY_NAMESPACE = "edge.replay-expiry";
/** How long a GitHub delivery's signature is remembered. */
export const REPLAY_WINDOW_MS = 7 * 24 * 3_600_000;
/** At most this many expired signatures are pruned by one accepting commit (the alarm prunes the rest). */
export const PRUNE_BATCH = 16;
/** The alarm prunes at most this many batches per run; a remainder re-arms it at once. */
const ALARM_BATCHES = 8;

/** A recorded signature: the input its delivery was accepted as, until when. */
export interface ReplayRecord {
  readonly inputId: Id;
  readonly conversationId: Id;
  readonly expiresAt: number;
}

/** One delivery's signature on one endpoint. */
export interface ReplayKey {
  readonly endpoint: string;
  readonly signature: string;
}

/** What the replay book needs of a transaction (a commit's builder or its session view). */
interface ValueWrites {
  value<T>(addr: ValueRef<T>): ValueTx<T>;
}

const recordBase = sessionValue<ReplayRecord>(REPLAY_NAMESPACE);
/** The expiry entry's value is its record's key. */
const expiryBase = sessionValue<string>(EXPIRY_NAMESPACE);

function recordKey(key: ReplayKey): string {
  return `${key.endpoint}:${key.signature}`;
}

function recordValue(key: string): ValueSpec<ReplayRecord> {
  return withKey(recordBase, key);
}

/** Fixed-width milliseconds sort as numbers do. */
function expiryValue(expiresAt: number, key: string): ValueSpec<string> {
  return withKey(expiryBase, `${String(expiresAt).padStart(16, "0")}:${key}`);
}

function expiryOf(entryKey: string): number {
  return Number(entryKey.slice(0, entryKey.indexOf(":")));
}

export class Replays {
  readonly #harness: Harness;
  readonly #clock: Clock;
  readonly #due: (at: number | undefined) => void;

  /** `due` is told the oldest expiry (undefined: none recorded), for the object's alarm. */
  constructor(harness: Harness, clock: Clock, due: (at: number | undefined) => void) {
    this.#harness = harness;
    this.#clock = clock;
    this.#due = due;
  }

  get #storage(): Storage {
    return this.#harness.storage;
  }

  /** In an accepting commit: the unexpired record of this signature, if the endpoint accepted it before. */
  async seen(tx: ValueWrites, key: ReplayKey): Promise<ReplayRecord | undefined> {
    const record = await tx.value(recordValue(recordKey(key))).get();
    return record !== undefined && record.expiresAt > this.#clock.now() ? record : undefined;
  }

  /**
   * In the commit that accepts the delivery: record its signature for the window, replacing an expired record of the
   * same signature, and prune up to PRUNE_BATCH other expired signatures.
   */
  async record(
    tx: ValueWrites,
    key: ReplayKey,
    accepted: { readonly inputId: Id; readonly conversationId: Id },
  ): Promise<void> {
    const now = this.#clock.now();
    const own = recordKey(key);
    const value = tx.value(recordValue(own));
    const prior = await value.get();
    if (prior !== undefined) tx.value(expiryValue(prior.expiresAt, own)).delete();
    await this.#prune(tx, now, own);
    const expiresAt = now + REPLAY_WINDOW_MS;
    value.set({ ...accepted, expiresAt });
    tx.value(expiryValue(expiresAt, own)).set(own);
  }

  /** After a commit that recorded a signature, or when the session opens: arm the alarm for the oldest expiry. */
  async settled(): Promise<void> {
    this.#due(await this.#oldest());
  }

  /**
   * The alarm fired: prune the expired signatures (in commits of PRUNE_BATCH), then re-arm for the oldest left. Commits
   * only when something expired, so an alarm for another reason writes nothing here.
   */
  async alarm(): Promise<void> {
    for (let round = 0; round < ALARM_BATCHES; round++) {
      const oldest = await this.#oldest();
      if (oldest === undefined || oldest > this.#clock.now()) break;
      const pruned = await this.#harness.commit((tx) => this.#prune(tx, this.#clock.now()), BACKGROUND_CONTEXT);
      if (pruned < PRUNE_BATCH) break;
    }
    await this.settled();
  }

  async #oldest(): Promise<number | undefined> {
    const { items } = await this.#storage.scanValues({
      scope: { session: true },
      namespace: EXPIRY_NAMESPACE,
      limit: 1,
    });
    const oldest = items[0];
    return oldest === undefined ? undefined : expiryOf(oldest.key);
  }

  /** Delete up to PRUNE_BATCH expired signatures (but not `keep`, which the caller rewrites); returns how many. */
  async #prune(tx: ValueWrites, now: number, keep?: string): Promise<number> {
    const { items } = await this.#storage.scanValues({
      scope: { session: true },
      namespace: EXPIRY_NAMESPACE,
      limit: PRUNE_BATCH,
    });
    let pruned = 0;
    for (const item of items) {
      const expiresAt = expiryOf(item.key);
      if (expiresAt > now) break;
      const key = item.version.value;
      if (typeof key !== "string" || key === keep) continue;
      tx.value(expiryValue(expiresAt, key)).delete();
      tx.value(recordValue(key)).delete();
      pruned += 1;
    }
    return pruned;
  }
}
