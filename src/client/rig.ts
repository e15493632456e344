/**
 * The typed client's rig routes (docs/rig.md; docs/api.md "Typed client"): a session's Gastown rig as
 * its token's role may use it. Reached from a session: `client.session("s").rig()`. Hook transitions
 * answer the hook with its version (the ETag, to pass back as `ifMatch`) and its attempt (Hook-Attempt).
 *
 * @example
 * const rig = client.session("town").rig();
 * await rig.registerAgent("polecat-1", { role: "polecat", conversation: "new" });
 * const { version } = await rig.setHook("polecat-1", { bead_id: "b-1", title: "Fix the build" });
 * await rig.sendMail("polecat-1", "the build is red");
 */
import type { z } from "zod";
import type {
  AgentRecordResponse,
  AgentsResponse,
  DeletedResponse,
  HookFileResponse,
  MailboxResponse,
  MailMessageResponse,
  MailViewResponse,
  NudgesResponse,
  RegisterAgentResponse,
  RigHealthResponse,
  RigSettingsResponse,
} from "../api/responses.js";
import type { ProblemBody } from "../api/problems.js";
import type { registerBody, setHookBody, witnessPatch } from "../api/rig.js";
import type { Id } from "../storage/records.js";
import { PicoApiError, queryString, type ClientTransport } from "./transport.js";

/** `PUT .../rig/agents/{agent_id}`: the role, and `conversation: "new"` for a conversation agent. */
export type RegisterAgentBody = z.input<typeof registerBody>;
/** `PUT .../rig/agents/{agent_id}/hook`: the work item (bead) to hook. */
export type HookWork = z.input<typeof setHookBody>;
/** `PATCH .../rig/witness`: the settings to change. */
export type WitnessPatch = z.input<typeof witnessPatch>;

/** A hook as its routes answer it: the document's record, its version (the ETag) and its attempt (Hook-Attempt). */
export interface HookResponse {
  readonly hook: HookFileResponse;
  /** Send as `ifMatch` to make the next transition conditional on this version. */
  readonly version: number;
  readonly attempt: number;
}

/** A mail payload: a non-empty string or a JSON object. */
export type MailPayload = MailMessageResponse["payload"];

/** The rig's operations and the client methods that call them (merged into CLIENT_OPERATIONS in client.ts). */
export const RIG_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  registerAgent: "RigClient.registerAgent",
  listAgents: "RigClient.agents",
  deregisterAgent: "RigClient.deregisterAgent",
  terminateAgent: "RigClient.terminateAgent",
  getAgentHook: "RigClient.agentHook",
  setHook: "RigClient.setHook",
  clearHook: "RigClient.clearHook",
  ownHook: "RigClient.hook",
  activateHook: "RigClient.activate",
  touchHook: "RigClient.touch",
  completeHook: "RigClient.complete",
  listMail: "RigClient.mail",
  sendMail: "RigClient.sendMail",
  ackMail: "RigClient.ackMail",
  nudges: "RigClient.nudges",
  getWitness: "RigClient.witness",
  patchWitness: "RigClient.patchWitness",
  rigHealth: "RigClient.health",
  hookFile: "RigClient.hookFile",
  chipsetExport: "RigClient.chipsetState",
};

/**
 * The rig's routes (docs/rig.md): the mayor and operators register agents, assign and
 * clear hooks, read health; an agent (a token with its agent id) long-polls its own hook, activates,
 * touches and completes it, and reads its nudges; everyone in the rig sends and reads mail.
 */
export class RigClient {
  readonly #client: ClientTransport;
  readonly path: string;

  constructor(client: ClientTransport, path: string) {
    this.#client = client;
    this.path = path;
  }

  async #hook(method: string, path: string, options: { body?: unknown; ifMatch?: number } = {}): Promise<HookResponse> {
    const headers: Record<string, string> = options.ifMatch === undefined ? {} : { "if-match": `"${options.ifMatch}"` };
    const response = await this.#client.request<HookFileResponse>(method, path, {
      headers,
      ...(options.body === undefined ? {} : { body: options.body }),
    });
    const version = Number(/^"(\d+)"$/.exec(response.headers.get("etag") ?? "")?.[1] ?? Number.NaN);
    return { hook: response.body, version, attempt: Number(response.headers.get("hook-attempt") ?? Number.NaN) };
  }

  /**
   * Register an agent (mayor, operator): `conversation: "new"` makes it a conversation agent. 201 created, 200 the same
   * again.
   */
  async registerAgent(agentId: string, request: RegisterAgentBody): Promise<RegisterAgentResponse> {
    return (
      await this.#client.request<RegisterAgentResponse>("PUT", `${this.path}/agents/${encodeURIComponent(agentId)}`, {
        body: request,
      })
    ).body;
  }

  /** Every agent with its hook and health (mayor, operator). */
  async agents(): Promise<AgentsResponse> {
    return (await this.#client.request<AgentsResponse>("GET", `${this.path}/agents`)).body;
  }

  /** Deregister an agent whose hook is empty (mayor). */
  async deregisterAgent(agentId: string): Promise<DeletedResponse> {
    return (await this.#client.request<DeletedResponse>("DELETE", `${this.path}/agents/${encodeURIComponent(agentId)}`))
      .body;
  }

  /** Abort a conversation agent's work (mayor). */
  async terminateAgent(agentId: string): Promise<AgentRecordResponse> {
    return (
      await this.#client.request<AgentRecordResponse>(
        "POST",
        `${this.path}/agents/${encodeURIComponent(agentId)}/terminate`,
      )
    ).body;
  }

  /** An agent's hook; `wait` (seconds) long-polls until it is not empty. */
  agentHook(agentId: string, options: { wait?: number } = {}): Promise<HookResponse> {
    return this.#hook("GET", `${this.path}/agents/${encodeURIComponent(agentId)}/hook${queryString(options)}`);
  }

  /** empty -> pending (mayor): hook a work item (bead) on an agent; `ifMatch` makes it conditional. */
  setHook(agentId: string, work: HookWork, options: { ifMatch?: number } = {}): Promise<HookResponse> {
    return this.#hook("PUT", `${this.path}/agents/${encodeURIComponent(agentId)}/hook`, { body: work, ...options });
  }

  /** completed -> empty (mayor), after verifying the work. */
  clearHook(agentId: string, options: { ifMatch?: number } = {}): Promise<HookResponse> {
    return this.#hook("DELETE", `${this.path}/agents/${encodeURIComponent(agentId)}/hook`, options);
  }

  /** The calling agent's own hook (agent token); `wait` (seconds) long-polls until it is not empty. */
  hook(options: { wait?: number } = {}): Promise<HookResponse> {
    return this.#hook("GET", `${this.path}/hook${queryString(options)}`);
  }

  /**
   * pending -> active (the owning agent). `attempt` (required: the hook's `attempt`, its Hook-Attempt
   * header) names the assignment, so a worker whose hook the mayor cleared or reassigned is refused.
   */
  activate(options: { attempt: number; ifMatch?: number }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/activate`, {
      body: { attempt: options.attempt },
      ...(options.ifMatch === undefined ? {} : { ifMatch: options.ifMatch }),
    });
  }

  /** Update last_activity (throttled: a touch within the throttle writes nothing); `attempt` as for activate. */
  touch(options: { attempt: number }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/touch`, { body: { attempt: options.attempt } });
  }

  /** active -> completed (the owning agent), with an optional summary for the mayor; `attempt` as for activate. */
  complete(options: { attempt: number; summary?: string }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/complete`, {
      body: { attempt: options.attempt, ...(options.summary === undefined ? {} : { summary: options.summary }) },
    });
  }

  /** A page of the caller's mailbox by cursor: pass the page's `next` as `after` for the following one. */
  async mail(query: { after?: Id; limit?: number } = {}): Promise<MailboxResponse> {
    return (await this.#client.request<MailboxResponse>("GET", `${this.path}/mail${queryString(query)}`)).body;
  }

  /** Send durable mail to an agent, `mayor` or `witness`. */
  async sendMail(to: string, payload: MailPayload): Promise<MailMessageResponse> {
    return (await this.#client.request<MailMessageResponse>("POST", `${this.path}/mail`, { body: { to, payload } }))
      .body;
  }

  async ackMail(mailId: Id): Promise<MailViewResponse> {
    return (await this.#client.request<MailViewResponse>("POST", `${this.path}/mail/${mailId}/ack`)).body;
  }

  /** Nudges for the calling external agent since it last asked; `wait` (seconds) long-polls. */
  async nudges(options: { wait?: number } = {}): Promise<NudgesResponse> {
    return (await this.#client.request<NudgesResponse>("GET", `${this.path}/nudges${queryString(options)}`)).body;
  }

  async witness(): Promise<RigSettingsResponse> {
    return (await this.#client.request<RigSettingsResponse>("GET", `${this.path}/witness`)).body;
  }

  /** Change the witness's settings (mayor, operator); each at least 1,000 ms. */
  async patchWitness(patch: WitnessPatch): Promise<RigSettingsResponse> {
    return (await this.#client.request<RigSettingsResponse>("PATCH", `${this.path}/witness`, { body: patch })).body;
  }

  /** The witness document's RigHealthReport (mayor, operator). */
  async health(): Promise<RigHealthResponse> {
    return (await this.#client.request<RigHealthResponse>("GET", `${this.path}/health`)).body;
  }

  /** `.chipset/state/hooks/{agent_id}.json`: the hook file exactly as the document writes it. */
  async hookFile(agentId: string): Promise<HookFileResponse> {
    return (
      await this.#client.request<HookFileResponse>(
        "GET",
        `${this.path}/chipset/state/hooks/${encodeURIComponent(agentId)}.json`,
      )
    ).body;
  }

  /** The `.chipset/state` tree as a tar archive. */
  async chipsetState(): Promise<Uint8Array> {
    const response = await this.#client.send("GET", `${this.path}/chipset/state`);
    if (!response.ok) {
      const text = await response.text();
      throw new PicoApiError(
        response.status,
        (text === "" ? { code: "internal", detail: "no body" } : JSON.parse(text)) as ProblemBody,
      );
    }
    return new Uint8Array(await response.arrayBuffer());
  }
}
