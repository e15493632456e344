/**
 * The typed client's API keys (docs/users.md "API keys"): an operator creates the long-lived, revocable credentials a
 * product's backend holds instead of tokens. Construct it over a PicoClient holding an operator token (or key).
 *
 * @example
 * const keys = new ApiKeysClient(client);
 * const { secret } = await keys.create({ name: "billing-backend", role: "operator" });
 * const backend = new PicoClient({ baseUrl, token: secret });
 */
import type { ApiKeyBody, ApiKeyCreatedResponse, ApiKeyResponse } from "../api/api-keys.js";

/** What the API-keys client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface ApiKeysRequester {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T }>;
}

export class ApiKeysClient {
  readonly #client: ApiKeysRequester;
  readonly path = "/v1/api-keys";

  constructor(client: ApiKeysRequester) {
    this.#client = client;
  }

  /** Create a key: the answer's `secret` is shown this once (only its hash is stored). */
  async create(key: ApiKeyBody): Promise<ApiKeyCreatedResponse> {
    return (await this.#client.request<ApiKeyCreatedResponse>("POST", this.path, { body: key })).body;
  }

  /** The tenant's keys, never a secret. */
  async list(): Promise<{ readonly items: readonly ApiKeyResponse[] }> {
    return (await this.#client.request<{ readonly items: readonly ApiKeyResponse[] }>("GET", this.path)).body;
  }

  /** Delete a key: refused at once by the isolate that served this, within 5 s everywhere. */
  async delete(id: string): Promise<{ readonly id: string; readonly deleted: true }> {
    return (
      await this.#client.request<{ readonly id: string; readonly deleted: true }>(
        "DELETE",
        `${this.path}/${encodeURIComponent(id)}`,
      )
    ).body;
  }
}

/** The API-key routes' client methods (CLIENT_OPERATIONS in client.ts). */
export const API_KEY_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  createApiKey: "ApiKeysClient.create",
  listApiKeys: "ApiKeysClient.list",
  deleteApiKey: "ApiKeysClient.delete",
};
