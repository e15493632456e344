/**
 * The typed client's tenant inbound endpoints (docs/integrations.md "Routing"): an operator defines an endpoint of
 * the tenant's whose deliveries are routed to a session and a thread rendered from each payload. Construct it over a
 * PicoClient holding an operator token (or API key). The sender's deliveries are not a client call: the platform
 * signs them with the endpoint's secret.
 *
 * @example
 * const endpoints = new InboundEndpointsClient(client);
 * const { url } = await endpoints.put("github", { format: "github", secret, session: "gh-{{repository.name}}",
 *   route: "{{repository.full_name}}#{{issue.number}}", sessionTemplate: "triage" });
 */
import type { TenantInboundBody, TenantInboundResponse } from "../api/inbound.js";
import type { DeletedResponse } from "../api/responses.js";

/** What this client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface InboundEndpointsRequester {
  request<T>(method: string, path: string, options?: { body?: unknown }): Promise<{ status: number; body: T }>;
}

export class InboundEndpointsClient {
  readonly #client: InboundEndpointsRequester;
  readonly path = "/v1/inbound-endpoints";

  constructor(client: InboundEndpointsRequester) {
    this.#client = client;
  }

  /** Create or replace an endpoint; a new standard endpoint's answer carries its secret (the only time it is shown). */
  async put(name: string, config: TenantInboundBody): Promise<TenantInboundResponse> {
    return (
      await this.#client.request<TenantInboundResponse>("PUT", `${this.path}/${encodeURIComponent(name)}`, {
        body: config,
      })
    ).body;
  }

  async list(): Promise<{ readonly items: readonly TenantInboundResponse[] }> {
    return (await this.#client.request<{ readonly items: readonly TenantInboundResponse[] }>("GET", this.path)).body;
  }

  async get(name: string): Promise<TenantInboundResponse> {
    return (await this.#client.request<TenantInboundResponse>("GET", `${this.path}/${encodeURIComponent(name)}`)).body;
  }

  /** Delete an endpoint: deliveries to its URL are refused (401) from now on; its sessions and threads stay. */
  async delete(name: string): Promise<DeletedResponse> {
    return (await this.#client.request<DeletedResponse>("DELETE", `${this.path}/${encodeURIComponent(name)}`)).body;
  }

  /**
   * A new signing secret: a standard endpoint's is generated and answered (`secret`); a github, slack or stripe
   * endpoint is given the one its platform now shows. The previous one verifies for 24 h.
   */
  async rotateSecret(name: string, secret?: string): Promise<TenantInboundResponse> {
    return (
      await this.#client.request<TenantInboundResponse>(
        "POST",
        `${this.path}/${encodeURIComponent(name)}/rotate-secret`,
        secret === undefined ? {} : { body: { secret } },
      )
    ).body;
  }
}

/** The tenant inbound routes' client methods (CLIENT_OPERATIONS in client.ts). */
export const INBOUND_ENDPOINT_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putTenantInbound: "InboundEndpointsClient.put",
  listTenantInbound: "InboundEndpointsClient.list",
  getTenantInbound: "InboundEndpointsClient.get",
  deleteTenantInbound: "InboundEndpointsClient.delete",
  rotateTenantInboundSecret: "InboundEndpointsClient.rotateSecret",
};
