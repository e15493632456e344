/**
 * The rig's operations inside the session Durable Object (docs/rig.md): the RPC table the rig routes
 * (http/routes/rig.ts) call through `op(name, ...)`, over the session's Rig (src/rig/). It adds what needs
 * the host: live nudges to a conversation agent's watchers (FeedBook), the `rigName` (the session's
 * name, which the route knows), and the `.chipset/state` export.
 */
import type { Id } from "../../storage/records.js";
import {
  Rig,
  serializeSorted,
  type Actor,
  type AgentListing,
  type AgentRecord,
  type HookView,
  type MailMessage,
  type MailPayload,
  type MailPage,
  type MailView,
  type Nudge,
  type RegisterRequest,
  type RigHealth,
  type RigSettings,
  type Transition,
  type TransitionRequest,
  type TransitionResult,
} from "../../rig/index.js";
import { chipsetArchive } from "../../rig/chipset.js";
import type { RigSessionOps } from "./ops.js";
import type { FeedBook } from "../watch/transport.js";

/** The session's rig plus the host's live delivery. */
export class RigOps {
  readonly rig: Rig;

  constructor(rig: Rig, feeds: FeedBook) {
    this.rig = rig;
    rig.nudges.setLiveSink((conversationId, nudge) => feeds.announce(conversationId, nudge));
  }

  /** The table the SessionObject's `op` dispatches to. */
  static table(): {
    readonly [K in keyof RigSessionOps]: (
      ops: RigOps,
      ...args: RigSessionOps[K]["args"]
    ) => Promise<RigSessionOps[K]["result"]>;
  } {
    return {
      rigRegister: (o, actor, agentId, request) => o.rig.register(actor, agentId, request),
      rigAgents: (o) => o.rig.agents(),
      rigDeregister: (o, actor, agentId) => o.rig.deregister(actor, agentId),
      rigTerminate: (o, actor, agentId) => o.rig.terminate(actor, agentId),
      rigHook: (o, actor, agentId, waitMs) =>
        waitMs > 0 ? o.rig.waitHook(actor, agentId, waitMs) : o.rig.hookFor(actor, agentId),
      rigTransition: (o, actor, agentId, transition, request) => o.rig.transition(actor, agentId, transition, request),
      rigMail: (o, actor, query) => o.rig.mail(actor, undefined, query),
      rigSend: (o, actor, to, payload) => o.rig.send(actor, to, payload),
      rigAck: (o, actor, id) => o.rig.ack(actor, id),
      rigNudges: async (o, actor, waitMs) => {
        if (actor.role !== "agent") return [];
        await o.rig.agent(actor.agent);
        return o.rig.nudges.take(actor.agent, waitMs);
      },
      rigSettings: (o) => o.rig.settings(),
      rigPatchSettings: (o, actor, patch) => o.rig.patchSettings(actor, patch),
      rigHealth: async (o, rigName) => {
        o.rig.name = rigName;
        return o.rig.health();
      },
      rigHookFile: async (o, actor, agentId) => serializeSorted((await o.rig.hookFor(actor, agentId)).hook),
      rigExport: async (o, actor) => chipsetArchive(o.rig, actor),
    };
  }
}
