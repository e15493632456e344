/**
 * The typed client's end-user administration (docs/users.md; operator): session templates, which fix
 * what the agent is for the sessions users create from them, the profiles they and sessions name
 * (docs/api.md "Profiles"), revoking a user's tokens and erasing a user. Reached
 * from the client: `client.users()`. It also reads and sets the tenant's default retention (docs/operations.md
 * "Retention"). A template record carries its `version`; pass it as `ifMatch` to
 * change or delete only the version you read (a mismatch throws PicoApiError 412 `precondition_failed`);
 * so does a profile record.
 *
 * @example
 * const users = client.users();
 * await users.putTemplate("support", { model: "echo/echo", selectedTools: ["echo"], profile: "support", userSettable:
 * ["title"] });
 * await users.revoke("user-42");
 */
import type { ErasureResponse, RevokeResponse, TemplateBody, TemplateRecord } from "../api/templates.js";
import type { ProfileBody, ProfileDeletedResponse, ProfileRecord } from "../api/profiles.js";
import type { Retention } from "../api/schemas.js";

/** What the users client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface UsersRequester {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T }>;
}

export interface TemplateWriteOptions {
  /** Only if the template is at this version (its record's `version`), or `"*"`: only if it exists. */
  readonly ifMatch?: number | "*";
}

/** The operations `UsersClient` covers (merged into CLIENT_OPERATIONS). */
export const USERS_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putTemplate: "UsersClient.putTemplate",
  listTemplates: "UsersClient.templates",
  getTemplate: "UsersClient.template",
  deleteTemplate: "UsersClient.deleteTemplate",
  putProfile: "UsersClient.putProfile",
  listProfiles: "UsersClient.profiles",
  getProfile: "UsersClient.profile",
  deleteProfile: "UsersClient.deleteProfile",
  revokeUser: "UsersClient.revoke",
  getRetention: "UsersClient.retention",
  putRetention: "UsersClient.putRetention",
  eraseUser: "UsersClient.erase",
  getErasure: "UsersClient.erasure",
};

export class UsersClient {
  readonly #client: UsersRequester;

  constructor(client: UsersRequester) {
    this.#client = client;
  }

  /** The tenant's session templates, by name. */
  async templates(): Promise<{ readonly items: readonly TemplateRecord[] }> {
    return (await this.#client.request<{ items: TemplateRecord[] }>("GET", "/v1/templates")).body;
  }

  /** One template (an unknown one throws 404 `template_not_found`). */
  async template(name: string): Promise<TemplateRecord> {
    return (await this.#client.request<TemplateRecord>("GET", `/v1/templates/${encodeURIComponent(name)}`)).body;
  }

  /** Define or replace a template: the session PUT's fields plus `userSettable`. */
  async putTemplate(name: string, template: TemplateBody, options: TemplateWriteOptions = {}): Promise<TemplateRecord> {
    return (
      await this.#client.request<TemplateRecord>("PUT", `/v1/templates/${encodeURIComponent(name)}`, {
        body: template,
        headers: conditional(options),
      })
    ).body;
  }

  /** Delete a template: sessions created from it keep what it said. */
  async deleteTemplate(
    name: string,
    options: TemplateWriteOptions = {},
  ): Promise<{ readonly name: string; readonly deleted: true }> {
    return (
      await this.#client.request<{ name: string; deleted: true }>(
        "DELETE",
        `/v1/templates/${encodeURIComponent(name)}`,
        { headers: conditional(options) },
      )
    ).body;
  }

  /** The tenant's live profiles, each at its latest version, by name. */
  async profiles(): Promise<{ readonly items: readonly ProfileRecord[] }> {
    return (await this.#client.request<{ items: ProfileRecord[] }>("GET", "/v1/profiles")).body;
  }

  /** A profile's latest version (an unknown or deleted one throws 404 `profile_not_found`). */
  async profile(name: string): Promise<ProfileRecord> {
    return (await this.#client.request<ProfileRecord>("GET", `/v1/profiles/${encodeURIComponent(name)}`)).body;
  }

  /** Define a profile, or make its next version. */
  async putProfile(name: string, profile: ProfileBody, options: TemplateWriteOptions = {}): Promise<ProfileRecord> {
    return (
      await this.#client.request<ProfileRecord>("PUT", `/v1/profiles/${encodeURIComponent(name)}`, {
        body: profile,
        headers: conditional(options),
      })
    ).body;
  }

  /** Delete a profile (409 `profile_in_use` while a template names it). */
  async deleteProfile(name: string, options: TemplateWriteOptions = {}): Promise<ProfileDeletedResponse> {
    return (
      await this.#client.request<ProfileDeletedResponse>("DELETE", `/v1/profiles/${encodeURIComponent(name)}`, {
        headers: conditional(options),
      })
    ).body;
  }

  /** The tenant's default retention (null: none). */
  async retention(): Promise<{ readonly retention: Retention | null }> {
    return (await this.#client.request<{ retention: Retention | null }>("GET", "/v1/retention")).body;
  }

  /**
   * Set the tenant's default retention (null clears it): sessions created from then on without a template's own are
   * deleted that many days after their last activity; existing sessions keep theirs.
   */
  async putRetention(retention: Retention | null): Promise<{ readonly retention: Retention | null }> {
    return (
      await this.#client.request<{ retention: Retention | null }>("PUT", "/v1/retention", { body: { retention } })
    ).body;
  }

  /** Refuse the user's tokens issued before now, and close its open watches. */
  async revoke(sub: string): Promise<RevokeResponse> {
    return (
      await this.#client.request<RevokeResponse>("POST", `/v1/users/${encodeURIComponent(sub)}/revoke`, { body: {} })
    ).body;
  }

  /**
   * Erase a user (docs/operations.md "Deleting a user's data"): its sessions, usage and directory rows; its older
   * tokens are refused at once. Answers the erasure (the one already running for the user, if any).
   */
  async erase(sub: string): Promise<ErasureResponse> {
    return (
      await this.#client.request<ErasureResponse>("POST", `/v1/users/${encodeURIComponent(sub)}/erase`, { body: {} })
    ).body;
  }

  /** Where an erasure stands: sessions found, deleted, remaining (an unknown one throws 404 `erasure_not_found`). */
  async erasure(id: string): Promise<ErasureResponse> {
    return (await this.#client.request<ErasureResponse>("GET", `/v1/erasures/${encodeURIComponent(id)}`)).body;
  }
}

function conditional(options: TemplateWriteOptions): Record<string, string> {
  return options.ifMatch === undefined ? {} : { "if-match": options.ifMatch === "*" ? "*" : `"${options.ifMatch}"` };
}
