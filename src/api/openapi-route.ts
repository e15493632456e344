/**
 * How a route of the HTTP API is declared for its OpenAPI document (src/api/openapi.ts, docs/api.md): the
 * route shape (method, path template, auth, query, headers, body, responses) and the short helpers the
 * route tables (src/api/openapi-*.ts) are written with.
 */
import { z } from "zod";

export type HttpMethod = "get" | "put" | "post" | "patch" | "delete";

/** How a route authenticates. */
export type RouteAuth =
  /** `Authorization: Bearer <JWT>` with a role that has the capability. */
  | { readonly type: "bearer"; readonly capability: string }
  /** A bearer token, or a watch token in `?access_token=`. */
  | { readonly type: "watch" }
  /** A signature with the endpoint's secret: Standard Webhooks, or an inbound endpoint's platform format. */
  | { readonly type: "webhook" }
  | { readonly type: "none" };

/** A response: a JSON body with its schema, a stream, or plain text. */
export type RouteResponse = { readonly description: string } & (
  | { readonly json: z.ZodType }
  | { readonly stream: "text/event-stream" | "application/jsonl" }
  | { readonly text: true }
);

/** One route, declared once. */
export interface ApiRoute {
  readonly method: HttpMethod;
  /** OpenAPI path template: `/v1/sessions/{session}/...`. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly auth: RouteAuth;
  readonly query?: z.ZodObject;
  /** Request headers; a signed route's headers are required unless `required: false` (one per format). */
  readonly headers?: Readonly<
    Record<string, { readonly schema: z.ZodType; readonly description: string; readonly required?: boolean }>
  >;
  readonly body?: { readonly schema: z.ZodType; readonly required: boolean };
  readonly responses: Readonly<Record<number, RouteResponse>>;
}

/** The session path template. */
export const S = "/v1/sessions/{session}";
/** The conversation path template, under the session's. */
export const C = `${S}/conversations/{conversation}`;
/** Bearer auth with a capability. */
export const client = (capability: string): RouteAuth => ({ type: "bearer", capability });
/** A JSON response with its schema. */
export const ok = (json: z.ZodType, description = "OK"): RouteResponse => ({ description, json });
/** A JSON request body (required unless told). */
export const body = (schema: z.ZodType, required = true): ApiRoute["body"] => ({ schema, required });
/** The If-Match header of the versioned tenant records (tools, templates). */
export const ifMatchHeader = {
  "if-match": {
    schema: z.string(),
    description:
      'An ETag this server sent ("<version>"), or *: 412 precondition_failed unless it names the current version',
  },
};
