/**
 * Every bearer-token route of the HTTP API with the capability it needs, for the tenant-isolation and
 * role tests (one table, so a new route that is not listed here is a visible gap in review).
 */
import type { Capability } from "../../src/worker/identity/auth.js";

export interface RouteCase {
  readonly name: string;
  readonly method: string;
  readonly path: (session: string) => string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  readonly capability: Capability;
  /** Claims the token needs beside tenant and role (a route of the token's own user needs its `sub`). */
  readonly claims?: Record<string, unknown>;
}

const s = (session: string): string => `/v1/sessions/${session}`;
const c = (session: string): string => `${s(session)}/conversations/root`;

export const ROUTES: readonly RouteCase[] = [
  { name: "PUT session", method: "PUT", path: s, body: {}, capability: "session.create" },
  { name: "GET session", method: "GET", path: s, capability: "session.read" },
  { name: "DELETE session", method: "DELETE", path: s, capability: "delete" },
  { name: "GET export", method: "GET", path: (x) => `${s(x)}/export`, capability: "export" },
  {
    name: "POST inputs",
    method: "POST",
    path: (x) => `${c(x)}/inputs`,
    body: { input: "hi" },
    headers: { "idempotency-key": "role-key" },
    capability: "input",
  },
  { name: "GET input", method: "GET", path: (x) => `${s(x)}/inputs/2`, capability: "input" },
  { name: "DELETE input", method: "DELETE", path: (x) => `${s(x)}/inputs/2`, capability: "input" },
  { name: "GET acceptance", method: "GET", path: (x) => `${s(x)}/acceptances/some-key`, capability: "input" },
  { name: "GET conversation", method: "GET", path: c, capability: "conversation" },
  { name: "GET entries", method: "GET", path: (x) => `${c(x)}/entries?limit=10`, capability: "conversation" },
  { name: "POST abort", method: "POST", path: (x) => `${c(x)}/abort`, capability: "conversation" },
  { name: "POST fork", method: "POST", path: (x) => `${c(x)}/fork`, body: { at: "start" }, capability: "conversation" },
  { name: "POST collapse", method: "POST", path: (x) => `${c(x)}/collapse`, capability: "conversation" },
  { name: "POST reset", method: "POST", path: (x) => `${c(x)}/reset`, capability: "conversation" },
  { name: "GET config", method: "GET", path: (x) => `${c(x)}/config`, capability: "config" },
  {
    name: "PATCH config",
    method: "PATCH",
    path: (x) => `${c(x)}/config`,
    body: { thinking: "low" },
    capability: "config",
  },
  { name: "GET conversation watch", method: "GET", path: (x) => `${c(x)}/watch`, capability: "watch" },
  { name: "GET session watch", method: "GET", path: (x) => `${s(x)}/watch`, capability: "watch" },
  { name: "POST conversation watch-token", method: "POST", path: (x) => `${c(x)}/watch-token`, capability: "watch" },
  { name: "POST session watch-token", method: "POST", path: (x) => `${s(x)}/watch-token`, capability: "watch" },
  { name: "GET usage", method: "GET", path: (x) => `${s(x)}/usage`, capability: "usage" },
  {
    name: "POST schedules",
    method: "POST",
    path: (x) => `${s(x)}/schedules`,
    body: { input: "hi", every: 60000 },
    capability: "conversation",
  },
  { name: "GET schedules", method: "GET", path: (x) => `${s(x)}/schedules`, capability: "conversation" },
  { name: "GET schedule", method: "GET", path: (x) => `${s(x)}/schedules/3`, capability: "conversation" },
  {
    name: "PATCH schedule",
    method: "PATCH",
    path: (x) => `${s(x)}/schedules/3`,
    body: { paused: true },
    capability: "conversation",
  },
  { name: "DELETE schedule", method: "DELETE", path: (x) => `${s(x)}/schedules/3`, capability: "conversation" },
  { name: "GET tasks", method: "GET", path: (x) => `${s(x)}/tasks?live=true`, capability: "tasks" },
  { name: "POST task abort", method: "POST", path: (x) => `${s(x)}/tasks/3/abort`, capability: "tasks" },
  { name: "POST task release", method: "POST", path: (x) => `${s(x)}/tasks/3/release`, capability: "quarantine" },
  { name: "GET inspect", method: "GET", path: (x) => `${s(x)}/inspect`, capability: "inspect" },
  { name: "POST shutdown", method: "POST", path: (x) => `${s(x)}/shutdown`, capability: "shutdown" },
  { name: "POST fault clear", method: "POST", path: (x) => `${s(x)}/fault/clear`, capability: "fault" },
  { name: "POST rig resume", method: "POST", path: (x) => `${s(x)}/rig/resume`, capability: "import" },
  { name: "GET inbound", method: "GET", path: (x) => `${s(x)}/inbound`, capability: "inbound" },
  { name: "GET inbound endpoint", method: "GET", path: (x) => `${s(x)}/inbound/github`, capability: "inbound" },
  { name: "DELETE inbound endpoint", method: "DELETE", path: (x) => `${s(x)}/inbound/github`, capability: "inbound" },
  { name: "GET pending", method: "GET", path: (x) => `${s(x)}/pending`, capability: "pending" },
  { name: "GET conversation pending", method: "GET", path: (x) => `${c(x)}/pending`, capability: "pending" },
  {
    name: "POST pending answer",
    method: "POST",
    path: (x) => `${s(x)}/pending/t3-client`,
    body: { output: "hi" },
    capability: "pending",
  },
  {
    name: "POST mcp",
    method: "POST",
    path: (x) => `${s(x)}/mcp`,
    body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    headers: { accept: "application/json, text/event-stream" },
    capability: "input",
  },
  { name: "GET deliveries", method: "GET", path: (x) => `${s(x)}/deliveries`, capability: "webhooks" },
  {
    name: "POST delivery retry",
    method: "POST",
    path: (x) => `${s(x)}/deliveries/3.we_aaaaaaaaaaaaaaaa/retry`,
    capability: "webhooks",
  },
  { name: "GET rig witness", method: "GET", path: (x) => `${s(x)}/rig/witness`, capability: "rig" },
  {
    name: "POST rig mail",
    method: "POST",
    path: (x) => `${s(x)}/rig/mail`,
    body: { to: "mayor", payload: "hello" },
    capability: "rig",
  },
];

/**
 * Bearer-token routes of the tenant rather than of a session (the tool catalog, webhook endpoints, identity providers):
 * an allowed role reads or
 * writes the tenant's own catalog, so these are checked apart from the session routes (401 without a
 * token, 403 without the capability, and the operator's capabilities are the union of both tables).
 */
export const TENANT_ROUTES: readonly RouteCase[] = [
  { name: "POST sessions", method: "POST", path: () => "/v1/sessions", body: {}, capability: "session.create" },
  { name: "POST tokens", method: "POST", path: () => "/v1/tokens", body: { sub: "someone" }, capability: "tokens" },
  { name: "GET tools", method: "GET", path: () => "/v1/tools", capability: "tools" },
  { name: "GET tool", method: "GET", path: () => "/v1/tools/lookup", capability: "tools" },
  { name: "DELETE tool", method: "DELETE", path: () => "/v1/tools/lookup", capability: "tools" },
  {
    name: "PUT tool",
    method: "PUT",
    path: () => "/v1/tools/lookup",
    body: { description: "d", parameters: { type: "object" }, handler: { type: "client" } },
    capability: "tools",
  },
  { name: "GET webhook endpoints", method: "GET", path: () => "/v1/webhook-endpoints", capability: "webhooks" },
  {
    name: "GET webhook endpoint",
    method: "GET",
    path: () => "/v1/webhook-endpoints/we_aaaaaaaaaaaaaaaa",
    capability: "webhooks",
  },
  {
    name: "PATCH webhook endpoint",
    method: "PATCH",
    path: () => "/v1/webhook-endpoints/we_aaaaaaaaaaaaaaaa",
    body: { enabled: false },
    capability: "webhooks",
  },
  {
    name: "DELETE webhook endpoint",
    method: "DELETE",
    path: () => "/v1/webhook-endpoints/we_aaaaaaaaaaaaaaaa",
    capability: "webhooks",
  },
  {
    name: "POST webhook endpoint rotate-secret",
    method: "POST",
    path: () => "/v1/webhook-endpoints/we_aaaaaaaaaaaaaaaa/rotate-secret",
    capability: "webhooks",
  },
  { name: "GET api keys", method: "GET", path: () => "/v1/api-keys", capability: "keys" },
  {
    name: "POST api key",
    method: "POST",
    path: () => "/v1/api-keys",
    body: { name: "role-check", role: "client" },
    capability: "keys",
  },
  { name: "DELETE api key", method: "DELETE", path: () => "/v1/api-keys/ak_0123456789abcdef", capability: "keys" },
  {
    name: "POST tool rotate-secret",
    method: "POST",
    path: () => "/v1/tools/lookup/rotate-secret",
    capability: "tools",
  },
  { name: "GET issuers", method: "GET", path: () => "/v1/issuers", capability: "issuers" },
  { name: "GET issuer", method: "GET", path: () => "/v1/issuers/lookup", capability: "issuers" },
  { name: "DELETE issuer", method: "DELETE", path: () => "/v1/issuers/lookup", capability: "issuers" },
  {
    name: "PUT issuer",
    method: "PUT",
    path: () => "/v1/issuers/lookup",
    body: { issuer: "https://idp.example/", jwksUri: "https://idp.example/jwks", audience: "pico" },
    capability: "issuers",
  },
  { name: "PUT limits", method: "PUT", path: () => "/v1/limits", body: {}, capability: "limits" },
  { name: "GET limits", method: "GET", path: () => "/v1/limits", capability: "limits" },
  { name: "GET usage", method: "GET", path: () => "/v1/usage?sub=someone", capability: "limits" },
  { name: "GET me usage", method: "GET", path: () => "/v1/me/usage", capability: "usage", claims: { sub: "someone" } },
  { name: "GET mcp servers", method: "GET", path: () => "/v1/mcp-servers", capability: "mcp" },
  { name: "GET mcp server", method: "GET", path: () => "/v1/mcp-servers/github", capability: "mcp" },
  { name: "DELETE mcp server", method: "DELETE", path: () => "/v1/mcp-servers/github", capability: "mcp" },
  // A URL no server answers is refused before it is reached (422): the role check comes first.
  {
    name: "PUT mcp server",
    method: "PUT",
    path: () => "/v1/mcp-servers/github",
    body: { url: "ftp://mcp.example.test/mcp" },
    capability: "mcp",
  },
  { name: "POST mcp server refresh", method: "POST", path: () => "/v1/mcp-servers/github/refresh", capability: "mcp" },
  { name: "GET templates", method: "GET", path: () => "/v1/templates", capability: "templates" },
  { name: "GET template", method: "GET", path: () => "/v1/templates/lookup", capability: "templates" },
  { name: "DELETE template", method: "DELETE", path: () => "/v1/templates/lookup", capability: "templates" },
  {
    name: "PUT template",
    method: "PUT",
    path: () => "/v1/templates/lookup",
    body: { model: "echo/echo", userSettable: ["title"] },
    capability: "templates",
  },
  { name: "GET profiles", method: "GET", path: () => "/v1/profiles", capability: "profiles" },
  { name: "GET profile", method: "GET", path: () => "/v1/profiles/support", capability: "profiles" },
  { name: "DELETE profile", method: "DELETE", path: () => "/v1/profiles/support", capability: "profiles" },
  {
    name: "PUT profile",
    method: "PUT",
    path: () => "/v1/profiles/support",
    body: { sections: [{ id: "role", text: "You answer questions." }] },
    capability: "profiles",
  },
  { name: "POST user revoke", method: "POST", path: () => "/v1/users/someone/revoke", capability: "users" },
  { name: "POST user erase", method: "POST", path: () => "/v1/users/someone/erase", capability: "users" },
  {
    name: "POST import",
    method: "POST",
    path: (x) => `/v1/sessions/${x === "unused" ? "rig" : x}/import`,
    body: {},
    capability: "import",
  },
  {
    name: "GET erasure",
    method: "GET",
    path: () => `/v1/erasures/er_${"0".repeat(32)}`,
    capability: "users",
  },
];
