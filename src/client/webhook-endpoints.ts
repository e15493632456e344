/**
 * The typed client's events out (docs/integrations.md "Events out"): the tenant's webhook endpoints
 * (`client.webhookEndpoints()`) and a session's deliveries (`client.session("s").deliveries()`), both
 * for operators.
 *
 * @example
 * const { id, secret } = await client.webhookEndpoints().create({ url: "https://example.com/hooks", events:
 * ["input.completed"] });
 * const dead = await client.session("support").deliveries().list({ status: "dead" });
 * await client.session("support").deliveries().retry(dead.items[0].id);
 */
import type {
  DeliveryListResponse,
  DeliveryResponse,
  EndpointBody,
  EndpointListResponse,
  EndpointPatchBody,
  EndpointResponse,
} from "../api/webhook-endpoints.js";
import type { Requester } from "./inbound.js";

/** Each operation and the client method that calls it (merged into CLIENT_OPERATIONS). */
export const EVENTS_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  createWebhookEndpoint: "WebhookEndpointsClient.create",
  listWebhookEndpoints: "WebhookEndpointsClient.list",
  getWebhookEndpoint: "WebhookEndpointsClient.get",
  patchWebhookEndpoint: "WebhookEndpointsClient.update",
  deleteWebhookEndpoint: "WebhookEndpointsClient.delete",
  rotateWebhookEndpointSecret: "WebhookEndpointsClient.rotateSecret",
  listDeliveries: "DeliveriesClient.list",
  retryDelivery: "DeliveriesClient.retry",
};

export class WebhookEndpointsClient {
  readonly #client: Requester;
  readonly path = "/v1/webhook-endpoints";

  constructor(client: Requester) {
    this.#client = client;
  }

  /** Register an endpoint; the answer carries its `whsec_` secret, the only time it is shown. */
  async create(endpoint: EndpointBody): Promise<EndpointResponse> {
    return (await this.#client.request<EndpointResponse>("POST", this.path, { body: endpoint })).body;
  }

  async list(): Promise<EndpointListResponse> {
    return (await this.#client.request<EndpointListResponse>("GET", this.path)).body;
  }

  async get(id: string): Promise<EndpointResponse> {
    return (await this.#client.request<EndpointResponse>("GET", `${this.path}/${encodeURIComponent(id)}`)).body;
  }

  /** Change fields; `enabled: false` disables the endpoint, `enabled: true` re-enables it. */
  async update(id: string, patch: EndpointPatchBody): Promise<EndpointResponse> {
    return (
      await this.#client.request<EndpointResponse>("PATCH", `${this.path}/${encodeURIComponent(id)}`, { body: patch })
    ).body;
  }

  async delete(id: string): Promise<{ id: string; deleted: true }> {
    return (
      await this.#client.request<{ id: string; deleted: true }>("DELETE", `${this.path}/${encodeURIComponent(id)}`)
    ).body;
  }

  /** A new secret (answered once); deliveries carry signatures with both for 24 h. */
  async rotateSecret(id: string): Promise<EndpointResponse> {
    return (
      await this.#client.request<EndpointResponse>("POST", `${this.path}/${encodeURIComponent(id)}/rotate-secret`)
    ).body;
  }
}

export class DeliveriesClient {
  readonly #client: Requester;
  /** `/v1/sessions/{session}/deliveries`. */
  readonly path: string;

  constructor(client: Requester, path: string) {
    this.#client = client;
    this.path = path;
  }

  /** Newest first; filter by status and endpoint. */
  async list(
    query: { status?: "pending" | "dead" | "done"; endpoint?: string; limit?: number } = {},
  ): Promise<DeliveryListResponse> {
    const params = new URLSearchParams();
    if (query.status !== undefined) params.set("status", query.status);
    if (query.endpoint !== undefined) params.set("endpoint", query.endpoint);
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    const search = params.size > 0 ? `?${params}` : "";
    return (await this.#client.request<DeliveryListResponse>("GET", `${this.path}${search}`)).body;
  }

  /** Send a delivery again now (its endpoint must be enabled). */
  async retry(id: string): Promise<DeliveryResponse> {
    return (await this.#client.request<DeliveryResponse>("POST", `${this.path}/${encodeURIComponent(id)}/retry`)).body;
  }
}
