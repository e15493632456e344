/**
 * The SessionObject's RPC surface as its callers see it through a Durable Object stub (the HTTP layer
 * and tests). Every method returns a promise over the wire, and the values are structured clones.
 *
 * Why a hand-written interface: the stub type that `@cloudflare/workers-types` derives from the class
 * (`DurableObjectStub<SessionObject>`) maps every result through its `Rpc` serialization types, and the
 * recursive `JsonValue` inside task records makes that mapping "excessively deep" for the compiler.
 *
 * The HTTP operations go through one typed method, `op(name, ...args)`, whose table is `SessionOps`
 * (session/ops.ts); they return `Outcome`s (a value or a problem) because RPC drops error classes.
 */
import type { Element, Id } from "../../storage/records.js";
import type { SessionInspection } from "../../api/responses.js";
import type { Outcome } from "../problems.js";
import type { SessionConfigBody } from "../schemas.js";
import type { SessionConfig } from "./api.js";
import type { CreateConfig, SessionOps } from "./ops.js";
import type { SessionObject } from "./object.js";
import type { SessionWhere } from "../identity/owner.js";
import type { RetentionSource, TemplateBinding } from "../directory/templates.js";
import type { DirectoryMeta, RelabelAnswer } from "./directory-link.js";
import type { RetentionView } from "./retention.js";
import type { ImportResponse } from "../../api/transfer.js";

export interface SessionRpc {
  create(config?: CreateConfig): Promise<{ readonly created: boolean }>;
  exists(): Promise<boolean>;
  /** The session's incarnation (src/kinds/incarnation.ts); undefined: no such session, or one from before them. */
  incarnation(): Promise<string | undefined>;
  inspect(): Promise<SessionInspection>;
  abortTask(taskId: Id): Promise<void>;
  shutdown(): Promise<void>;
  clearFault(): Promise<{ readonly cleared: boolean }>;
  releaseQuarantine(taskId: Id): Promise<void>;
  createSession(
    body: SessionConfigBody,
    where?: SessionWhere,
    template?: TemplateBinding,
    retention?: RetentionSource,
  ): Promise<Outcome<{ readonly created: boolean; readonly config: SessionConfig }>>;
  /** The template the session was created from (directory/templates.ts), and whether it exists. */
  templateBinding(): Promise<{ readonly exists: boolean; readonly binding?: TemplateBinding }>;
  /** Close `sub`'s watches issued before `before` (Unix seconds): a revocation (watch/guard.ts). */
  closeWatches(sub: string, before: number): Promise<{ readonly closed: number }>;
  /** The directory's title, labels and metadata, and the variables (`variables`), refused as one (nothing written). */
  relabel(
    change: {
      readonly title?: string | null;
      readonly labels?: readonly string[];
      readonly metadata?: Readonly<Record<string, string | null>>;
    },
    variables?: Readonly<Record<string, string | null>>,
  ): Promise<Outcome<RelabelAnswer>>;
  /**
   * Whether end user `sub` reaches this session: it owns it, or (`creating`) nobody created it yet
   * (identity/user-access.ts).
   */
  reaches(sub: string, creating: boolean): Promise<boolean>;
  directoryMeta(): Promise<DirectoryMeta | undefined>;
  /** The directory title, labels and metadata, and the retention with its expiry (session/retention.ts). */
  details(): Promise<{ readonly meta?: DirectoryMeta; readonly retention?: RetentionView }>;
  op<K extends keyof SessionOps>(name: K, ...args: SessionOps[K]["args"]): Promise<Outcome<SessionOps[K]["result"]>>;
  /** `op` for end user `sub`: `session_not_found` when the user does not reach the session (user-access.ts). */
  opAs<K extends keyof SessionOps>(
    sub: string,
    name: K,
    ...args: SessionOps[K]["args"]
  ): Promise<Outcome<SessionOps[K]["result"]>>;
  /** With `where`, a name the directory still lists but this object no longer holds is unlinked (object.ts). */
  destroy(where?: { readonly tenant: string; readonly session: string }): Promise<Outcome<{ readonly deleted: true }>>;
  /** `destroy`, only if nothing committed since this object created the session (a create undone). */
  destroyUnused(where: {
    readonly tenant: string;
    readonly session: string;
  }): Promise<Outcome<{ readonly deleted: boolean }>>;
  fetch(request: Request): Promise<Response>;
  /** The session as JSONL (session/transfer.ts); `redacted` for a user's export. */
  exportSession(name: string, redacted: boolean): Promise<Outcome<ReadableStream<Uint8Array>>>;
  /** Stage an export into this (empty) object, then link and open it (session/transfer.ts). */
  importSession(
    where: { readonly tenant: string; readonly session: string },
    body: ReadableStream<Uint8Array>,
  ): Promise<Outcome<ImportResponse>>;
}

/** The typed RPC view of a session stub. */
export function sessionRpc(stub: DurableObjectStub<SessionObject>): SessionRpc {
  return stub as unknown as SessionRpc;
}

export type { Element };
