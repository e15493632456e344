/**
 * The typed client's identity providers (docs/users.md "Identity providers"): an operator registers the
 * tenant's providers, whose tokens then act as user tokens. Construct it over a PicoClient holding an
 * operator token.
 *
 * @example
 * const issuers = new IssuersClient(client);
 * await issuers.put("auth0", { issuer: "https://example.eu.auth0.com/", jwksUri:
 * "https://example.eu.auth0.com/.well-known/jwks.json", audience: "https://api.example.com" });
 */
import type { IssuerBody, IssuerListResponse, IssuerResponse } from "../api/issuers.js";

/** What the issuers client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface IssuersRequester {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T }>;
}

export class IssuersClient {
  readonly #client: IssuersRequester;
  readonly path = "/v1/issuers";

  constructor(client: IssuersRequester) {
    this.#client = client;
  }

  /** The tenant's identity providers, by name. */
  async list(): Promise<IssuerListResponse> {
    return (await this.#client.request<IssuerListResponse>("GET", this.path)).body;
  }

  /** One provider (an unknown name throws 404 `issuer_not_found`). */
  async get(name: string): Promise<IssuerResponse> {
    return (await this.#client.request<IssuerResponse>("GET", `${this.path}/${encodeURIComponent(name)}`)).body;
  }

  /** Register or replace a provider (a bad field throws 422 `invalid_issuer` naming it). */
  async put(name: string, registration: IssuerBody): Promise<IssuerResponse> {
    return (
      await this.#client.request<IssuerResponse>("PUT", `${this.path}/${encodeURIComponent(name)}`, {
        body: registration,
      })
    ).body;
  }

  /** Remove a provider: its tokens are refused within a minute (at once by the isolate that served this). */
  async delete(name: string): Promise<{ readonly name: string; readonly deleted: true }> {
    return (
      await this.#client.request<{ readonly name: string; readonly deleted: true }>(
        "DELETE",
        `${this.path}/${encodeURIComponent(name)}`,
      )
    ).body;
  }
}

/** The identity-provider routes' client methods (CLIENT_OPERATIONS in client.ts). */
export const ISSUER_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putIssuer: "IssuersClient.put",
  listIssuers: "IssuersClient.list",
  getIssuer: "IssuersClient.get",
  deleteIssuer: "IssuersClient.delete",
};
