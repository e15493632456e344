/**
 * OpenAPI route declarations (src/api/openapi.ts) for integrations (docs/integrations.md): input from a
 * signed webhook, inbound endpoints and their deliveries ("Events in"), and the tenant's webhook
 * endpoints with the session's event deliveries ("Events out").
 */
import { z } from "zod";
import { webhookBody, noQuery } from "./schemas.js";
import {
  inboundBody,
  rotateInboundBody,
  tenantInboundBody,
  tenantInboundListResponse,
  tenantInboundOut,
} from "./inbound.js";
import {
  deliveriesQuery,
  deliveryList,
  deliveryOut,
  endpointBody,
  endpointDeleted,
  endpointList,
  endpointOut,
  endpointPatchBody,
} from "./webhook-endpoints.js";
import {
  acceptResponse,
  deletedResponse,
  inboundDeliveryResponse,
  inboundListResponse,
  inboundOut,
  jsonValue,
} from "./responses.js";
import { S, body, client, ok, type ApiRoute } from "./openapi-route.js";

/** Input from a signed webhook (Standard Webhooks, per-endpoint secret). */
export const WEBHOOK_INPUT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: "/v1/webhooks/{tenant}/{session}/{conversation}",
    operationId: "webhook",
    summary: "Queue input from a signed webhook (Standard Webhooks, per-endpoint secret)",
    auth: { type: "webhook" },
    headers: {
      "webhook-id": { schema: z.string(), description: "The delivery id (the request key)" },
      "webhook-timestamp": { schema: z.string(), description: "Unix seconds" },
      "webhook-signature": { schema: z.string(), description: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" },
    },
    body: body(webhookBody),
    responses: { 202: ok(acceptResponse, "Queued"), 200: ok(acceptResponse, "A redelivery: the first acceptance") },
  },
];

/** The signature headers of an inbound delivery, one per format. */
const INBOUND_SIGNATURES: ApiRoute["headers"] = {
  "x-hub-signature-256": {
    schema: z.string(),
    description: "github: sha256=<hex HMAC-SHA256 of the raw body>; X-GitHub-Delivery is the delivery id",
    required: false,
  },
  "x-slack-signature": {
    schema: z.string(),
    description: "slack: v0=<hex HMAC-SHA256 of v0:{X-Slack-Request-Timestamp}:{body}>",
    required: false,
  },
  "stripe-signature": {
    schema: z.string(),
    description: "stripe: t=<seconds>,v1=<hex HMAC-SHA256 of {t}.{body}>",
    required: false,
  },
  "webhook-signature": {
    schema: z.string(),
    description: "standard: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)",
    required: false,
  },
};

/** Inbound endpoints (docs/integrations.md "Events in"). */
export const INBOUND_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: `${S}/inbound/{name}`,
    operationId: "putInbound",
    summary:
      "Point a sender (standard, github, slack or stripe format) at a conversation; a standard endpoint's generated secret is answered once",
    auth: client("inbound"),
    body: body(inboundBody),
    responses: { 201: ok(inboundOut, "Created"), 200: ok(inboundOut, "Replaced") },
  },
  {
    method: "get",
    path: `${S}/inbound`,
    operationId: "listInbound",
    summary: "The session's inbound endpoints (never their secrets)",
    auth: client("inbound"),
    responses: { 200: ok(inboundListResponse) },
  },
  {
    method: "get",
    path: `${S}/inbound/{name}`,
    operationId: "getInbound",
    summary: "One inbound endpoint (never its secret)",
    auth: client("inbound"),
    responses: { 200: ok(inboundOut) },
  },
  {
    method: "delete",
    path: `${S}/inbound/{name}`,
    operationId: "deleteInbound",
    summary: "Delete an inbound endpoint: its deliveries are refused from now on",
    auth: client("inbound"),
    responses: { 200: ok(deletedResponse) },
  },
  {
    method: "post",
    path: "/v1/inbound/{tenant}/{session}/{name}",
    operationId: "inboundDelivery",
    summary:
      "A delivery from an integration, verified in the endpoint's format; queues input (or answers a GitHub ping or Slack url_verification)",
    auth: { type: "webhook" },
    headers: INBOUND_SIGNATURES,
    body: body(z.record(z.string(), jsonValue)),
    responses: {
      200: ok(inboundDeliveryResponse, "Accepted ({ inputId, duplicate }), or the platform's handshake answer"),
    },
  },
];

/** A tenant's inbound endpoints, routed per thread (docs/integrations.md "Routing"). */
export const TENANT_INBOUND_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/inbound-endpoints/{name}",
    operationId: "putTenantInbound",
    summary:
      "Define a tenant inbound endpoint whose deliveries are routed to a session and a thread rendered from the payload",
    auth: client("inbound"),
    query: noQuery,
    body: body(tenantInboundBody),
    responses: { 201: ok(tenantInboundOut, "Created"), 200: ok(tenantInboundOut, "Replaced") },
  },
  {
    method: "get",
    path: "/v1/inbound-endpoints",
    operationId: "listTenantInbound",
    summary: "The tenant's inbound endpoints (never their secrets)",
    auth: client("inbound"),
    query: noQuery,
    responses: { 200: ok(tenantInboundListResponse) },
  },
  {
    method: "get",
    path: "/v1/inbound-endpoints/{name}",
    operationId: "getTenantInbound",
    summary: "One tenant inbound endpoint (never its secret)",
    auth: client("inbound"),
    query: noQuery,
    responses: { 200: ok(tenantInboundOut) },
  },
  {
    method: "delete",
    path: "/v1/inbound-endpoints/{name}",
    operationId: "deleteTenantInbound",
    summary: "Delete a tenant inbound endpoint: its deliveries are refused from now on",
    auth: client("inbound"),
    query: noQuery,
    responses: { 200: ok(deletedResponse) },
  },
  {
    method: "post",
    path: "/v1/inbound-endpoints/{name}/rotate-secret",
    operationId: "rotateTenantInboundSecret",
    summary:
      "A new signing secret (a standard endpoint's generated and answered once); the previous one verifies for 24 h",
    auth: client("inbound"),
    query: noQuery,
    body: body(rotateInboundBody, false),
    responses: { 200: ok(tenantInboundOut) },
  },
  {
    method: "post",
    path: "/v1/inbound/{tenant}/{name}",
    operationId: "tenantInboundDelivery",
    summary:
      "A delivery to a tenant endpoint: verified in its format, routed to the session and thread its templates render",
    auth: { type: "webhook" },
    headers: INBOUND_SIGNATURES,
    body: body(z.record(z.string(), jsonValue)),
    responses: {
      200: ok(inboundDeliveryResponse, "Accepted ({ inputId, duplicate, session, thread }), ignored, or a handshake"),
    },
  },
];

/** Events out (docs/integrations.md "Events out"): webhook endpoints and deliveries. */
export const EVENTS_OUT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: "/v1/webhook-endpoints",
    operationId: "createWebhookEndpoint",
    summary: "Register an endpoint for the tenant's events; its whsec_ secret is answered once",
    auth: client("webhooks"),
    query: noQuery,
    body: body(endpointBody),
    responses: { 201: ok(endpointOut, "Created (with secret)") },
  },
  {
    method: "get",
    path: "/v1/webhook-endpoints",
    operationId: "listWebhookEndpoints",
    summary: "The tenant's endpoints (never their secrets)",
    auth: client("webhooks"),
    query: noQuery,
    responses: { 200: ok(endpointList) },
  },
  {
    method: "get",
    path: "/v1/webhook-endpoints/{endpointId}",
    operationId: "getWebhookEndpoint",
    summary: "One endpoint (never its secret)",
    auth: client("webhooks"),
    query: noQuery,
    responses: { 200: ok(endpointOut) },
  },
  {
    method: "patch",
    path: "/v1/webhook-endpoints/{endpointId}",
    operationId: "patchWebhookEndpoint",
    summary: "Change url, events, sessions, description; enabled: false disables, true re-enables",
    auth: client("webhooks"),
    query: noQuery,
    body: body(endpointPatchBody),
    responses: { 200: ok(endpointOut) },
  },
  {
    method: "delete",
    path: "/v1/webhook-endpoints/{endpointId}",
    operationId: "deleteWebhookEndpoint",
    summary: "Delete an endpoint: its pending deliveries die",
    auth: client("webhooks"),
    query: noQuery,
    responses: { 200: ok(endpointDeleted) },
  },
  {
    method: "post",
    path: "/v1/webhook-endpoints/{endpointId}/rotate-secret",
    operationId: "rotateWebhookEndpointSecret",
    summary: "A new secret (answered once); the old one signs too for 24 h",
    auth: client("webhooks"),
    query: noQuery,
    responses: { 200: ok(endpointOut) },
  },
  {
    method: "get",
    path: `${S}/deliveries`,
    operationId: "listDeliveries",
    summary: "The session's event deliveries, newest first",
    auth: client("webhooks"),
    query: deliveriesQuery,
    responses: { 200: ok(deliveryList) },
  },
  {
    method: "post",
    path: `${S}/deliveries/{deliveryId}/retry`,
    operationId: "retryDelivery",
    summary: "Send a delivery again now, with a fresh retry window",
    auth: client("webhooks"),
    query: noQuery,
    responses: { 200: ok(deliveryOut) },
  },
];
