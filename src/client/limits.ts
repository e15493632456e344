/**
 * The typed client's limits and usage (docs/users.md "Limits and usage"): an operator sets the tenant's
 * limits and reads every user's usage; a user token reads its own. Built over a PicoClient:
 * `new LimitsClient(client)`. Over a limit, a request throws PicoApiError 429 `rate_limited` whose `field`
 * names the limit (`user.inputsPerDay`, ...).
 *
 * @example
 * const limits = new LimitsClient(client);
 * await limits.put({ user: { inputsPerDay: 200, concurrentTurns: 2 }, tenant: { costPerMonthUsd: 500 } });
 * const { items } = await limits.usage({ sub: "user-42", from: "2026-12-01" });
 */
import type { LimitsBody, LimitsResponse, UsageResponse } from "../api/limits.js";
import type { StatsResponse } from "../api/stats.js";

/** What the limits client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface LimitsRequester {
  request<T>(method: string, path: string, options?: { body?: unknown }): Promise<{ status: number; body: T }>;
}

/** A usage range: UTC days `YYYY-MM-DD`, inclusive (default: the last 30 days). */
export interface UsageRange {
  readonly from?: string;
  readonly to?: string;
}

function query(params: Record<string, string | undefined>): string {
  const entries = Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined);
  return entries.length === 0 ? "" : `?${new URLSearchParams(entries).toString()}`;
}

export class LimitsClient {
  readonly #client: LimitsRequester;

  constructor(client: LimitsRequester) {
    this.#client = client;
  }

  /** The tenant's limits (operator). */
  async get(): Promise<LimitsResponse> {
    return (await this.#client.request<LimitsResponse>("GET", "/v1/limits")).body;
  }

  /** Replace the tenant's limits (operator); `{}` limits nothing. */
  async put(limits: LimitsBody): Promise<LimitsResponse> {
    return (await this.#client.request<LimitsResponse>("PUT", "/v1/limits", { body: limits })).body;
  }

  /** Inputs, tokens and cost by user and day (operator); `sub` for one user. */
  async usage(range: UsageRange & { readonly sub?: string } = {}): Promise<UsageResponse> {
    return (
      await this.#client.request<UsageResponse>(
        "GET",
        `/v1/usage${query({ sub: range.sub, from: range.from, to: range.to })}`,
      )
    ).body;
  }

  /** The tenant's operator signals (operator; docs/operations.md "Stats"): sessions by status, tasks, outbox, pending. */
  async stats(): Promise<StatsResponse> {
    return (await this.#client.request<StatsResponse>("GET", "/v1/stats")).body;
  }

  /** The token's own user's usage (a user token). */
  async mine(range: UsageRange = {}): Promise<UsageResponse> {
    return (
      await this.#client.request<UsageResponse>("GET", `/v1/me/usage${query({ from: range.from, to: range.to })}`)
    ).body;
  }
}

/** Each operation and the client method that calls it (merged into CLIENT_OPERATIONS). */
export const LIMITS_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putLimits: "LimitsClient.put",
  getLimits: "LimitsClient.get",
  getUsage: "LimitsClient.usage",
  getMyUsage: "LimitsClient.mine",
  getStats: "LimitsClient.stats",
};
