/**
 * The SessionObject's RPC surface as its callers see it through a Durable Object stub (tests now, the
 * HTTP layer later). Every method returns a promise over the wire, and the values are structured clones.
 *
 * Why a hand-written interface: the stub type that `@cloudflare/workers-types` derives from the class
 * (`DurableObjectStub<SessionObject>`) maps every result through its `Rpc` serialization types, and the
 * recursive `JsonValue` inside task records makes that mapping "excessively deep" for the compiler.
 */
import type { Id } from "../storage/records.js";
import type { CreateConfig, SessionInspection, SessionObject } from "./session-object.js";

export interface SessionRpc {
  create(config?: CreateConfig): Promise<{ readonly created: boolean }>;
  exists(): Promise<boolean>;
  inspect(): Promise<SessionInspection>;
  abortTask(taskId: Id): Promise<void>;
  shutdown(): Promise<void>;
  clearFault(): Promise<{ readonly cleared: boolean }>;
  releaseQuarantine(taskId: Id): Promise<void>;
}

/** The typed RPC view of a session stub. */
export function sessionRpc(stub: DurableObjectStub<SessionObject>): SessionRpc {
  return stub as unknown as SessionRpc;
}
