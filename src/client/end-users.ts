/**
 * The typed client's end-user routes (docs/users.md): a product's backend mints a short-lived `user`
 * token for one of its users with an operator token, and the browser, holding that user token, creates
 * sessions under server-assigned names (a PUT on a name that exists would reveal that it exists).
 *
 * @example
 * // The backend (operator token):
 * const { token, expiresAt } = await new EndUserClient(operator).mintToken({ sub: "user-42", act: ["read", "write",
 * "watch", "create"] });
 * // The browser (that user token), from one of the tenant's templates (PUT /v1/templates/chat):
 * const { session } = await new EndUserClient(new PicoClient({ baseUrl, token })).newSession({ template: "chat" });
 */
import type { MintTokenBody, SessionConfigBody } from "../api/schemas.js";
import type { CreateSessionResponse, MintedTokenResponse } from "../api/responses.js";
import type { Requester } from "./inbound.js";

export type { MintTokenBody, MintedTokenResponse };

export class EndUserClient {
  readonly #client: Requester;

  constructor(client: Requester) {
    this.#client = client;
  }

  /**
   * `POST /v1/sessions`: create a session under a new unguessable name (the answer's `session`); a user token owns it
   * and must name a `template`.
   */
  async newSession(config: SessionConfigBody = {}): Promise<CreateSessionResponse> {
    return (await this.#client.request<CreateSessionResponse>("POST", "/v1/sessions", { body: config })).body;
  }

  /** `POST /v1/tokens` (operator): a `user` token for `sub`, at most an hour long. */
  async mintToken(body: MintTokenBody): Promise<MintedTokenResponse> {
    return (await this.#client.request<MintedTokenResponse>("POST", "/v1/tokens", { body })).body;
  }
}

/** The end-user routes' client methods (merged into CLIENT_OPERATIONS in client.ts). */
export const END_USER_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  createSessionNamedByServer: "EndUserClient.newSession",
  mintUserToken: "EndUserClient.mintToken",
};
