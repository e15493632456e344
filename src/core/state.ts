/**
 * State addresses (§4.1). Plugins declare addresses without ids: `conversationValue("plugin.plan")` is a
 * spec that a conversation handle, transaction or task runtime binds to its own conversation, and
 * `scratchList("frames")` binds to the running task. Storage sees only bound addresses.
 */
import type { Address, Id, List, Scope, Value } from "../storage/records.js";

declare const specValue: unique symbol;
declare const specList: unique symbol;

export type ScopeKind = "session" | "conversation" | "scratch";

/** An address without its owner id. */
export interface AddressSpec {
  readonly scopeKind: ScopeKind;
  readonly namespace: string;
  readonly key?: string;
  readonly rewind: boolean;
}

export interface ValueSpec<T> extends AddressSpec {
  readonly [specValue]?: T;
}

export interface ListSpec<T> extends AddressSpec {
  readonly [specList]?: T;
}

/** Anything that denotes a value: a bound address or a spec bound by context. */
export type ValueRef<T> = Value<T> | ValueSpec<T>;
export type ListRef<T> = List<T> | ListSpec<T>;

function spec(scopeKind: ScopeKind, namespace: string, key: string | undefined, rewind: boolean): AddressSpec {
  if (namespace === "") throw new TypeError("an address needs a namespace");
  return Object.freeze(key === undefined ? { scopeKind, namespace, rewind } : { scopeKind, namespace, key, rewind });
}

export function sessionValue<T>(namespace: string, options?: { key?: string }): ValueSpec<T> {
  return spec("session", namespace, options?.key, false);
}

export function sessionList<T>(namespace: string, options?: { key?: string }): ListSpec<T> {
  return spec("session", namespace, options?.key, false);
}

/** A conversation value; `rewind: true` keeps history that forks and historical reads see (§3.2). */
export function conversationValue<T>(namespace: string, options: { rewind: boolean; key?: string }): ValueSpec<T> {
  return spec("conversation", namespace, options.key, options.rewind);
}

export function conversationList<T>(namespace: string, options: { rewind: boolean; key?: string }): ListSpec<T> {
  return spec("conversation", namespace, options.key, options.rewind);
}

export function scratchValue<T>(namespace: string, options?: { key?: string }): ValueSpec<T> {
  return spec("scratch", namespace, options?.key, false);
}

export function scratchList<T>(namespace: string, options?: { key?: string }): ListSpec<T> {
  return spec("scratch", namespace, options?.key, false);
}

/** The same spec with another key, e.g. one value per input id. */
export function withKey<S extends AddressSpec>(addr: S, key: string): S {
  return Object.freeze({ ...addr, key });
}

export function isSpec(addr: Address | AddressSpec): addr is AddressSpec {
  return "scopeKind" in addr;
}

/** Where unbound specs land: the conversation and/or task a transaction works for. */
export interface Binding {
  readonly conversationId?: Id;
  readonly taskId?: Id;
}

/** Bind a spec to its owner; bound addresses pass through unchanged. */
export function bind<T>(addr: ValueRef<T>, binding: Binding): Value<T>;
export function bind<T>(addr: ListRef<T>, binding: Binding): List<T>;
export function bind(addr: Address | AddressSpec, binding: Binding): Address;
export function bind(addr: Address | AddressSpec, binding: Binding): Address {
  if (!isSpec(addr)) return addr;
  let scope: Scope;
  switch (addr.scopeKind) {
    case "session":
      scope = { session: true };
      break;
    case "conversation":
      if (binding.conversationId === undefined) {
        throw new TypeError(
          `conversation address ${addr.namespace} needs a conversation: use a conversation handle or bindTo()`,
        );
      }
      scope = { conversation: binding.conversationId };
      break;
    case "scratch":
      if (binding.taskId === undefined) throw new TypeError(`scratch address ${addr.namespace} needs a running task`);
      scope = { scratch: binding.taskId };
      break;
    default: {
      const never: never = addr.scopeKind;
      throw new TypeError(`unknown scope ${String(never)}`);
    }
  }
  const base = { scope, namespace: addr.namespace, rewind: addr.rewind };
  return addr.key === undefined ? base : { ...base, key: addr.key };
}

/** Bind a conversation spec to an explicit conversation id (for session-level transactions). */
export function bindTo<T>(addr: ValueSpec<T>, conversationId: Id): Value<T>;
export function bindTo<T>(addr: ListSpec<T>, conversationId: Id): List<T>;
export function bindTo(addr: AddressSpec, conversationId: Id): Address {
  return bind(addr, { conversationId });
}
