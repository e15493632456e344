/**
 * The SessionObject's op table: what `op(name, ...args)` runs for each operation of `SessionOps`
 * (session/ops.ts), over the open session. The conversation, config, task and usage operations call its
 * SessionApi (session/api.ts); the operator operations call the object's own RPC methods; the rest come
 * from their modules (inputs, schedules, rig, inbound endpoints, remote calls, pending answers, outbox).
 */
import type { Id } from "../../storage/records.js";
import { sessionKey } from "../../kinds/incarnation.js";
import type { SessionInspection } from "../../api/responses.js";
import { outboxOps, type Outbox } from "../outbox/outbox.js";
import { remoteCallOps } from "../remote/call-ops.js";
import { inboundOps } from "./inbound-ops.js";
import { inputOps } from "./input-ops.js";
import { chatOps } from "./chat-ops.js";
import type { OpenSession } from "./opening.js";
import type { RigSessionOps, SessionOps } from "./ops.js";
import { pendingOps } from "./pending-ops.js";
import { RigOps } from "./rig-ops.js";
import { scheduleOps } from "./schedule-ops.js";

/** Each operation of the table as a function of the open session. */
export type OpTable = {
  readonly [K in keyof SessionOps]: (
    session: OpenSession,
    ...args: SessionOps[K]["args"]
  ) => Promise<SessionOps[K]["result"]>;
};

/** The operator operations the table reaches on the object itself (its RPC methods). */
export interface OperatorOps {
  inspect(): Promise<SessionInspection>;
  shutdown(): Promise<void>;
  clearFault(): Promise<{ readonly cleared: boolean }>;
  rigResume(): Promise<{ readonly resumed: boolean }>;
  releaseQuarantine(taskId: Id): Promise<void>;
}

/** The rig's operations as entries of the SessionObject's op table. */
function bindRig(table: ReturnType<typeof RigOps.table>): {
  readonly [K in keyof RigSessionOps]: (
    session: OpenSession,
    ...args: RigSessionOps[K]["args"]
  ) => Promise<RigSessionOps[K]["result"]>;
} {
  const out: Record<string, (session: OpenSession, ...args: never[]) => Promise<unknown>> = {};
  for (const [name, run] of Object.entries(table) as [string, (ops: RigOps, ...args: never[]) => Promise<unknown>][]) {
    out[name] = (session, ...args) => run(session.rig, ...args);
  }
  return out as unknown as {
    readonly [K in keyof RigSessionOps]: (
      session: OpenSession,
      ...args: RigSessionOps[K]["args"]
    ) => Promise<RigSessionOps[K]["result"]>;
  };
}

/** The table over `object` (the operator operations) and the object's outbox. */
export function sessionOpTable(object: OperatorOps, outbox: () => Outbox): OpTable {
  return {
    summary: (s) => s.api.summary(),
    ...inputOps<OpenSession>(),
    ...chatOps<OpenSession>(),
    snapshot: (s, ref) => s.api.snapshot(ref),
    entries: (s, ref, query) => s.api.entries(ref, query),
    abort: async (s, ref) => {
      await s.api.abort(ref);
      return { aborted: true as const };
    },
    deleteConversation: (s, ref) => s.api.deleteConversation(ref),
    fork: (s, ref, options) => s.api.fork(ref, options),
    continue: async (s, ref, admission) => {
      const reserved =
        admission === undefined
          ? undefined
          : await s.limits.reserve(sessionKey(admission.session, s.incarnation), admission.payer, undefined, {
              slot: false,
            });
      try {
        return await s.api.continue(ref);
      } catch (error) {
        await reserved?.cancel();
        throw error;
      }
    },
    collapse: (s, ref, instructions) => s.api.collapse(ref, instructions),
    reset: async (s, ref, handoff) => {
      await s.api.reset(ref, handoff);
      return { reset: true as const };
    },
    getConfig: (s, ref) => s.api.getConfig(ref),
    patchConfig: (s, ref, patch) => s.api.patchConfig(ref, patch),
    setVariables: (s, patch) => s.api.setVariables(patch),
    tasks: (s, query) => s.api.tasks(query),
    abortTask: (s, id) => s.api.abortTask(id),
    usage: (s, query) => s.api.usage(query),
    ...scheduleOps<OpenSession>(),
    inspect: () => object.inspect(),
    shutdown: async () => {
      await object.shutdown();
      return { shutdown: true as const };
    },
    clearFault: () => object.clearFault(),
    rigResume: () => object.rigResume(),
    releaseQuarantine: async (s, id) => {
      await s.api.task(id);
      await object.releaseQuarantine(id);
      return { released: true as const };
    },
    lastSeq: async (s) => s.harness.storage.lastSeq,
    ...bindRig(RigOps.table()),
    ...inboundOps<OpenSession>(),
    ...remoteCallOps<OpenSession>(),
    ...pendingOps<OpenSession>(),
    ...outboxOps<OpenSession>(outbox),
  };
}
