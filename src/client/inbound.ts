/**
 * The typed client's inbound endpoints (docs/integrations.md "Events in"): an operator points a sender
 * that speaks its own format (GitHub, Slack, Stripe, Standard Webhooks) at a conversation of the session.
 * Reached from a session: `client.session("s").inbound()`. The sender's deliveries are not a client call:
 * the platform signs them with the endpoint's secret.
 *
 * @example
 * const inbound = client.session("support").inbound();
 * const { url } = await inbound.put("github", { format: "github", secret, template: "{{action}} on
 * {{repository.full_name}}" });
 */
import type { InboundBody } from "../api/inbound.js";
import type { DeletedResponse, InboundListResponse, InboundResponse } from "../api/responses.js";

/** What the inbound client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface Requester {
  request<T>(method: string, path: string, options?: { body?: unknown }): Promise<{ status: number; body: T }>;
}

export class InboundClient {
  readonly #client: Requester;
  /** `/v1/sessions/{session}/inbound`. */
  readonly path: string;

  constructor(client: Requester, path: string) {
    this.#client = client;
    this.path = path;
  }

  /** Create or replace an endpoint; a new standard endpoint's answer carries its secret (the only time it is shown). */
  async put(name: string, config: InboundBody): Promise<InboundResponse> {
    return (
      await this.#client.request<InboundResponse>("PUT", `${this.path}/${encodeURIComponent(name)}`, { body: config })
    ).body;
  }

  async list(): Promise<InboundListResponse> {
    return (await this.#client.request<InboundListResponse>("GET", this.path)).body;
  }

  async get(name: string): Promise<InboundResponse> {
    return (await this.#client.request<InboundResponse>("GET", `${this.path}/${encodeURIComponent(name)}`)).body;
  }

  /** Delete an endpoint: deliveries to its URL are refused (401) from now on. */
  async delete(name: string): Promise<DeletedResponse> {
    return (await this.#client.request<DeletedResponse>("DELETE", `${this.path}/${encodeURIComponent(name)}`)).body;
  }
}
