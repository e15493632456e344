/**
 * OpenAPI route declaration (src/api/openapi.ts) for AG-UI 1.0 over HTTP + SSE (docs/api.md "AG-UI").
 */
import { runAgentInput } from "./ag-ui.js";
import { S, body, client, type ApiRoute } from "./openapi-route.js";

/** The AG-UI run of a conversation. */
export const AG_UI_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${S}/ag-ui`,
    operationId: "runAgUi",
    summary:
      "Run an AG-UI 1.0 agent (RunAgentInput; threadId: root or a conversation id): accepts the last user message once, answers resume[] and tool messages, streams AG-UI events",
    auth: client("input"),
    body: body(runAgentInput),
    responses: {
      200: {
        description:
          "AG-UI events as SSE data lines: RUN_STARTED, TEXT_MESSAGE_*, TOOL_CALL_*, REASONING_*, then RUN_FINISHED (outcome success, interrupt or cancelled) or RUN_ERROR",
        stream: "text/event-stream",
      },
    },
  },
];
