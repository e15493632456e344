/**
 * Where a tenant's admissions go (docs/users.md "Limits and usage"): a user's inputs, requests and usage to that user's
 * shard (one LimitsObject per user, named by a hash of the sub, so one user's counts are exact and no object sees
 * every user's traffic); what no user sent to one of ANON_SHARDS shards by its session; the tenant's limits, leases
 * and totals stay with the tenant's own object (named by the tenant alone, as before shards).
 */
import { createHash } from "node:crypto";
import type { Env } from "../env.js";
import { limitsCallSeam } from "../platform/host-config.js";
import { objectId } from "../platform/object-ids.js";
import type { LimitsRpc } from "./object.js";

/** How many shards share the inputs no user sent (a webhook's, an operator's, a client token's). */
export const ANON_SHARDS = 16;

/** A shard: its tenant, and its key within the tenant (`u.{hash of sub}` or `s.{n}`). */
export interface ShardRef {
  readonly tenant: string;
  readonly key: string;
}

/** Users' shard keys this isolate computed (a hash each), at most KEYS_KEPT (then the map starts again). */
const userKeys = new Map<string, string>();
const KEYS_KEPT = 10_000;

/** The shard of user `sub`; without one, the shard of session key `session` (any shard when there is none). */
export function shardOf(tenant: string, sub: string | undefined, session: string | undefined): ShardRef {
  if (sub !== undefined) {
    let key = userKeys.get(sub);
    if (key === undefined) {
      key = `u.${createHash("sha256").update(sub).digest("base64url").slice(0, 22)}`;
      if (userKeys.size >= KEYS_KEPT) userKeys.clear();
      userKeys.set(sub, key);
    }
    return { tenant, key };
  }
  let h = 0x811c9dc5;
  const text = session ?? crypto.randomUUID();
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return { tenant, key: `s.${h % ANON_SHARDS}` };
}

/** The tenant's own LimitsObject (each call seen by a test's `limitsCall` seam, when one is set). */
export function limitsStub(env: Env, tenant: string): LimitsRpc {
  return seen(env, tenant, tenant, undefined);
}

/** A shard's LimitsObject (seen by the seam like the tenant's, with the shard's key). */
export function shardStub(env: Env, shard: ShardRef): LimitsRpc {
  return seen(env, `${shard.tenant}\n${shard.key}`, shard.tenant, shard.key);
}

function seen(env: Env, name: string, tenant: string, shard: string | undefined): LimitsRpc {
  const namespace = env.LIMITS;
  const stub = namespace.get(objectId(namespace, name)) as unknown as LimitsRpc;
  const seam = limitsCallSeam();
  if (seam === undefined) return stub;
  return new Proxy(stub, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return (...args: unknown[]) => {
        seam(tenant, property, shard);
        // Reflect.apply: an RPC method's own `apply` would be another remote method.
        return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
      };
    },
  });
}

/** How many stubs one object keeps (then it starts again). */
const STUBS_KEPT = 64;

/**
 * The shard stubs one object keeps for its own calls (a session's meter and reservations): made once, not per call. A
 * stub is an I/O object of the object that made it, so it is never shared with another object; a call that fails
 * drops its stub (a broken stub stays broken, so the next call makes a new one). With a test's `limitsCall` seam set,
 * every call makes its own (the seam is read when a stub is made).
 */
export class KeptShardStubs {
  readonly #env: Env;
  readonly #kept = new Map<string, LimitsRpc>();

  constructor(env: Env) {
    this.#env = env;
  }

  async call<T>(shard: ShardRef, use: (stub: LimitsRpc) => Promise<T>): Promise<T> {
    if (limitsCallSeam() !== undefined) return use(shardStub(this.#env, shard));
    const name = `${shard.tenant}\n${shard.key}`;
    let stub = this.#kept.get(name);
    if (stub === undefined) {
      if (this.#kept.size >= STUBS_KEPT) this.#kept.clear();
      stub = shardStub(this.#env, shard);
      this.#kept.set(name, stub);
    }
    try {
      return await use(stub);
    } catch (error) {
      if (this.#kept.get(name) === stub) this.#kept.delete(name);
      throw error;
    }
  }
}
