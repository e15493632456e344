/**
 * The fixed vocabulary of the storage contract suite: entry kinds and keys, task kinds, and the state
 * addresses the generator writes and the dump reads. Reads can only enumerate state by (scope,
 * namespace), so generator and dump share this list; a backend is never told about it.
 *
 * Rewindable and sticky addresses use distinct namespaces because an address's identity is (scope,
 * namespace, key) without its rewind policy: one identity must always be written with one policy.
 */
import type { Address, Id, JsonValue, List, Scope, Value } from "../../src/storage/records.js";

export const ENTRY_KINDS = ["user", "assistant", "tool", "summary"] as const;
export const ENTRY_KEYS = ["k1", "k2"] as const;
export const TASK_KINDS = ["generation", "tool", "job"] as const;

/** Keys used for values and lists; `undefined` is the keyless address. "B" < "a" < "é" in JS order. */
export const STATE_KEYS = [undefined, "a", "B", "é"] as const;
export type StateKey = (typeof STATE_KEYS)[number];

/** One family of addresses: a namespace written with one policy in one kind of scope. */
export interface Family {
  readonly namespace: string;
  readonly keys: readonly StateKey[];
}

/** Session values, including request-key mappings (§3.4: `pi.request` keyed by the request id). */
export const SESSION_VALUES: readonly Family[] = [
  { namespace: "sess.name", keys: [undefined, "a", "B"] },
  { namespace: "pi.request", keys: ["a", "B"] },
];
export const SESSION_LISTS: readonly Family[] = [{ namespace: "sess.inbox", keys: [undefined] }];
export const STICKY_VALUES: readonly Family[] = [{ namespace: "ui.expanded", keys: [undefined, "é"] }];
export const STICKY_LISTS: readonly Family[] = [{ namespace: "ui.queue", keys: [undefined] }];
export const REWIND_VALUES: readonly Family[] = [
  { namespace: "plan", keys: [undefined, "a"] },
  { namespace: "model", keys: ["B"] },
];
export const REWIND_LISTS: readonly Family[] = [{ namespace: "moves", keys: [undefined, "a"] }];
export const SCRATCH_VALUES: readonly Family[] = [{ namespace: "checkpoint", keys: [undefined, "a"] }];
export const SCRATCH_LISTS: readonly Family[] = [{ namespace: "frames", keys: [undefined] }];

function address(scope: Scope, namespace: string, key: StateKey | string, rewind: boolean): Address {
  return key === undefined ? { scope, namespace, rewind } : { scope, namespace, key, rewind };
}

export const SESSION: Scope = { session: true };

export function sessionValue(namespace: string, key?: string): Value<JsonValue> {
  return address(SESSION, namespace, key, false);
}
export function sessionList(namespace: string, key?: string): List<JsonValue> {
  return address(SESSION, namespace, key, false);
}
export function conversationValue(
  conversation: Id,
  namespace: string,
  key: string | undefined,
  rewind: boolean,
): Value<JsonValue> {
  return address({ conversation }, namespace, key, rewind);
}
export function conversationList(
  conversation: Id,
  namespace: string,
  key: string | undefined,
  rewind: boolean,
): List<JsonValue> {
  return address({ conversation }, namespace, key, rewind);
}
export function scratchValue(task: Id, namespace: string, key?: string): Value<JsonValue> {
  return address({ scratch: task }, namespace, key, false);
}
export function scratchList(task: Id, namespace: string, key?: string): List<JsonValue> {
  return address({ scratch: task }, namespace, key, false);
}

/** A short printable name for an address, used in dump labels. */
export function addressLabel(addr: Address): string {
  const scope =
    "session" in addr.scope
      ? "session"
      : "conversation" in addr.scope
        ? `conv=${addr.scope.conversation}`
        : `scratch=${addr.scope.scratch}`;
  return `${scope} ${addr.namespace}/${addr.key ?? "-"}${addr.rewind ? " (rewind)" : ""}`;
}
