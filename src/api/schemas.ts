/**
 * The wire schemas of the HTTP API (zod, at the boundary only: stored objects are trusted, §7.3): every
 * request body, query, header and path parameter, and the token claims. The one home of the wire
 * (docs/api.md "One wire schema"): the server validates with these (src/worker/schemas.ts adds the parser that turns a
 * failure into a Problem), the typed client takes its request types from them, and the OpenAPI document
 * (src/api/openapi.ts) is generated from them. Imports nothing from src/worker/.
 */
import { z } from "zod";
import { jsonValue } from "./responses.js";
import { profileName, profileVariables, variableName, variablesPatch } from "./profiles.js";

/** Bodies larger than this are refused with 413 before they are read (a stored row holds at most 2 MB). */
export const MAX_BODY_BYTES = 1_000_000;

/** Longest `?wait=` an accept may block for, seconds. */
export const MAX_WAIT_SECONDS = 60;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const ID = /^[1-9][0-9]{0,15}$/;
/** Visible ASCII: request keys are opaque, but must survive a header and a URL path. */
const KEY = /^[\x21-\x7e]{1,200}$/;

export const tenantName = z
  .string()
  .regex(NAME, "a tenant is 1-128 characters of A-Z a-z 0-9 _ . - starting with a letter or digit");
export const sessionName = z
  .string()
  .regex(NAME, "a session name is 1-128 characters of A-Z a-z 0-9 _ . - starting with a letter or digit");

/** A positive integer id (entry, task, input, conversation). */
export const idString = z
  .string()
  .regex(ID, "an id is a positive decimal integer")
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n), "the id is too large");

export const conversationRef = z.union([z.literal("root"), idString]);
export type ConversationRef = "root" | number;

/** `.` and `..` are refused: a URL path normalizes them away, so `GET .../acceptances/{key}` could never find them. */
export const requestKey = z
  .string()
  .regex(KEY, "a request key is 1-200 visible ASCII characters")
  .refine((key) => key !== "." && key !== "..", "a request key may not be a dot segment (. or ..)");

// ---------------------------------------------------------------------------------------------
// Bodies

const text = z.strictObject({ type: z.literal("text"), text: z.string() });
const image = z.strictObject({
  type: z.literal("image"),
  data: z.string().min(1),
  mimeType: z.string().regex(/^image\/[a-z0-9.+-]+$/, "an image mimeType such as image/png"),
});
export const userInput = z.union(
  [z.string().min(1, "input must not be empty"), z.array(z.union([text, image])).min(1, "input must not be empty")],
  { error: "input must be a non-empty string or a non-empty array of text and image parts" },
);

/** Thinking levels a config may name (pi-ai's levels plus `off`; the same list as kinds/model-request.ts). */
export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;

/** A conversation's generation config (PATCH .../config), also the generation part of a session's PUT. */
const generationConfigBody = z.strictObject({
  model: z.string().min(1).max(200).optional(),
  thinking: z.enum(THINKING_LEVELS, { error: `thinking must be one of ${THINKING_LEVELS.join(", ")}` }).optional(),
  selectedTools: z.array(z.string().min(1).max(100)).max(100).optional(),
  /** A profile of the tenant's (docs/api.md "Profiles"; an unknown one is 422 `unknown_profile`); null: none. */
  profile: profileName.nullable().optional(),
  budgetMs: z.number().int().min(1).max(3_600_000).optional(),
});

/** A session's directory title and labels (not part of its config: a second PUT does not compare them). */
const title = (): z.ZodString => z.string().min(1).max(200);
const labels = (): z.ZodArray<z.ZodString> =>
  z
    .array(
      z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$/,
          "a label is 1-64 characters of A-Z a-z 0-9 _ . : / - starting with a letter or digit",
        ),
    )
    .max(20);

/** A session's metadata (docs/api.md "Search and metadata"): a flat map of string values the directory indexes. */
export const MAX_METADATA_KEYS = 32;
export const MAX_METADATA_VALUE = 256;
const METADATA_KEY = /^[A-Za-z0-9_.-]{1,64}$/;
const metadataKey = z.string().regex(METADATA_KEY, "a metadata key is 1-64 characters of A-Z a-z 0-9 _ . -");
const metadataValue = z
  .string()
  .max(MAX_METADATA_VALUE, `a metadata value is at most ${MAX_METADATA_VALUE} characters`);
const metadataKeyCount = (map: Readonly<Record<string, unknown>>): boolean =>
  Object.keys(map).length <= MAX_METADATA_KEYS;
export const metadata = z
  .record(metadataKey, metadataValue)
  .refine(metadataKeyCount, `metadata holds at most ${MAX_METADATA_KEYS} keys`);
/** A PATCH of metadata: merged into the session's; a value sets a key, null deletes it. */
export const metadataPatch = z
  .record(metadataKey, metadataValue.nullable())
  .refine(metadataKeyCount, `metadata holds at most ${MAX_METADATA_KEYS} keys`);

/** A session template's name (docs/users.md "Templates"). */
export const templateName = z
  .string()
  .regex(/^[a-zA-Z0-9-]{1,32}$/, "a template name is 1-32 characters of A-Z a-z 0-9 -");

/**
 * A session's retention (docs/operations.md "Retention"): it is deleted `deleteAfterDays` days after its last
 * activity, unless it has live work then. Set by a template or the tenant's default; captured at create.
 */
export const retention = z.strictObject({
  deleteAfterDays: z
    .number({ error: "deleteAfterDays is a whole number of days, 1-3650" })
    .int("deleteAfterDays is a whole number of days, 1-3650")
    .min(1, "deleteAfterDays is a whole number of days, 1-3650")
    .max(3650, "deleteAfterDays is a whole number of days, 1-3650"),
});
export type Retention = z.infer<typeof retention>;

/** `PUT /v1/retention` and its answer (and GET's): the tenant's default retention (null: none). */
export const tenantRetention = z.strictObject({ retention: retention.nullable() });

/** The fields a session PUT sets: what a template (src/api/templates.ts) holds and marks user-settable. */
export const sessionFields = generationConfigBody.extend({
  onInterrupt: z.enum(["retry", "fail"], { error: 'onInterrupt is "retry" or "fail"' }).optional(),
  title: title().optional(),
  labels: labels().optional(),
  /** Flat string map the directory indexes for `GET /v1/sessions?metadata.{key}=`. */
  metadata: metadata.optional(),
  /** Ignored: a session is owned by the user whose token created it (docs/users.md), never by a body's say-so. */
  owner: z.unknown().optional(),
  /**
   * The values of the profile's `{{name}}` placeholders (docs/users.md "Instructions"): a sticky session value.
   * A template's are defaults; a user sets only the names its `userVariables` lists.
   */
  variables: profileVariables.optional(),
});

/** The variable names a template lets users set at create. */
export const userVariables = z
  .array(variableName)
  .max(32)
  .refine((names) => new Set(names).size === names.length, "userVariables names each variable at most once");

/**
 * PUT session: the root's generation config plus session-wide policy (`onInterrupt`: what a restart does to a
 * generation), and the directory's title and labels;
 * `template` starts from a session template's values (required for user tokens, which may set only the fields it marks
 * user-settable).
 */
export const sessionConfig = sessionFields.extend({ template: templateName.optional() });

/** PATCH session: the directory title (null clears it), labels and metadata (merged; null deletes a key). */
export const sessionPatch = z
  .strictObject({
    title: title().nullable().optional(),
    labels: labels().optional(),
    metadata: metadataPatch.optional(),
    /** Operators and clients only: a value sets a variable, null removes it (docs/users.md "Instructions"). */
    variables: variablesPatch.optional(),
  })
  .refine(
    (body) =>
      body.title !== undefined ||
      body.labels !== undefined ||
      body.metadata !== undefined ||
      body.variables !== undefined,
    "a session patch sets title, labels, metadata or variables",
  );

export type SessionPatch = z.input<typeof sessionPatch>;

/** What the directory records of a session's work: `faulted` is a session fault or a quarantined task. */
export const SESSION_STATUSES = ["idle", "busy", "faulted"] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** An activity bound: epoch ms, or an ISO 8601 time with an offset. */
const activityTime = z.union(
  [
    z
      .string()
      .regex(/^[0-9]{1,16}$/)
      .transform(Number),
    z.iso.datetime({ offset: true }).transform((s) => Date.parse(s)),
  ],
  { error: "a time is epoch milliseconds or an ISO 8601 time with an offset" },
);

/** The prefix of a metadata filter's query parameter: `?metadata.team=blue`. */
export const METADATA_PARAM = "metadata.";

/** The `metadata.{key}` parameters of GET /v1/sessions: every pair must match (at most 8). */
export const metadataFilters = z
  .record(metadataKey, metadataValue)
  .refine((map) => Object.keys(map).length <= 8, "at most 8 metadata filters");

/**
 * GET /v1/sessions: the tenant's directory, newest activity first. Besides these, `metadata.{key}={value}`
 * parameters filter by metadata (`metadataFilters`; the route takes them out before this strict parse).
 */
export const sessionsQuery = z.strictObject({
  limit: z
    .string()
    .regex(/^[1-9][0-9]{0,2}$/, "limit is 1-200")
    .transform(Number)
    .refine((n) => n <= 200, "limit is 1-200")
    .optional(),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,400}$/, "a cursor is what a previous page returned")
    .optional(),
  q: z.string().min(1).max(200).optional(),
  owner: z
    .string()
    .min(1)
    .max(128)
    .optional()
    .describe("Only this end user's sessions (a user token may name only itself: 403 otherwise)"),
  status: z
    .enum(SESSION_STATUSES, { error: `status is one of ${SESSION_STATUSES.join(", ")}` })
    .optional()
    .describe("idle: no live turn; busy: a live turn; faulted: a session fault or a quarantined task"),
  activeSince: activityTime.optional().describe("Only sessions whose lastActivityAt is at or after this time"),
  activeBefore: activityTime.optional().describe("Only sessions whose lastActivityAt is before this time"),
});
export type SessionConfigBody = z.infer<typeof sessionConfig>;

export const configPatch = generationConfigBody.refine(
  (body) => Object.keys(body).length > 0,
  "a config patch sets at least one field",
);

export const acceptBody = z
  .strictObject({
    input: userInput,
    /** Queue in this mode (queueInput) instead of accepting ("the user hit enter"). */
    mode: z.enum(["steer", "followUp", "nextRun"]).optional(),
    whenBusy: z.enum(["followUp", "steer", "reject"]).optional(),
  })
  .refine((body) => body.mode === undefined || body.whenBusy === undefined, {
    message: "whenBusy applies to accept only; a queued input (mode) has no whenBusy",
    path: ["whenBusy"],
  });
export type AcceptBody = z.infer<typeof acceptBody>;

export const webhookBody = z.strictObject({
  input: userInput,
  mode: z.enum(["steer", "followUp", "nextRun"]).optional(),
});

/** A late result an HTTP tool's endpoint posts (POST /v1/tool-results/{tenant}/{session}/{taskId}). */
export const toolResultBody = z.strictObject({
  output: jsonValue,
  isError: z.boolean().optional(),
});

export const forkBody = z.strictObject({
  at: z.union([z.literal("start"), z.number().int().positive()]),
  abort: z.boolean().optional(),
});

export const collapseBody = z.strictObject({ instructions: z.string().max(20_000).optional() });
export const resetBody = z.strictObject({ handoff: z.string().min(1).max(200_000).optional() });
export const emptyBody = z.strictObject({});

// ---------------------------------------------------------------------------------------------
// Queries (every parameter is a string; unknown parameters are refused like unknown body fields)

const cursorId = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,15})$/, "a cursor is a non-negative decimal integer")
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n), "the cursor is too large");
const limit = z
  .string()
  .regex(/^[1-9][0-9]{0,3}$/, "limit is an integer from 1 to 1000")
  .transform(Number)
  .refine((n) => n <= 1000, "limit is an integer from 1 to 1000");

/** `?after=&limit=`: a page by cursor (limit 1-1,000). */
export const cursorQuery = z.strictObject({
  after: cursorId.optional(),
  limit: limit.optional(),
});

export const entriesQuery = z.strictObject({
  before: cursorId.optional(),
  after: cursorId.optional(),
  limit: limit.optional(),
  kind: z.string().min(1).max(100).optional(),
});

export const tasksQuery = z.strictObject({
  live: z.enum(["true", "false"]).optional(),
  conversation: conversationRef.optional(),
  after: cursorId.optional(),
  limit: limit.optional(),
});

export const acceptQuery = z.strictObject({
  wait: z
    .string()
    .regex(/^[0-9]{1,3}$/, `wait is whole seconds from 0 to ${MAX_WAIT_SECONDS}`)
    .transform(Number)
    .refine((n) => n <= MAX_WAIT_SECONDS, `wait is whole seconds from 0 to ${MAX_WAIT_SECONDS}`)
    .optional(),
});

/** Watch routes: the token may travel in the query (EventSource and WebSocket cannot set headers). */
export const watchQuery = z.strictObject({
  access_token: z.string().min(1).optional(),
  /** Resume position for transports that cannot send Last-Event-ID (WebSocket). */
  lastEventId: z.string().max(40).optional(),
});

export const noQuery = z.strictObject({});

/** A watch event id: the commit's last seq, or `seq.n` for preview-only messages after it. */
export const eventId = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,15})(\.[1-9][0-9]{0,8})?$/, "Last-Event-ID is an event id this server sent (seq or seq.n)");

// ---------------------------------------------------------------------------------------------
// Tokens

export const roles = ["client", "operator", "mayor", "agent", "user"] as const;
export type Role = (typeof roles)[number];

/**
 * What a `user` token (an end user's browser) may do in the sessions it reaches; absent: all of them.
 * `read` (the session, its conversations, entries, tasks, usage, pending list), `write` (inputs, config
 * a template marks user-settable, answers to pending items), `watch`, `fork`, `create` (new sessions).
 */
export const userActions = ["read", "write", "watch", "fork", "create"] as const;
export type UserAction = (typeof userActions)[number];

/** The longest lifetime (exp - iat) of a `user` token, seconds: one hour. */
export const USER_TOKEN_MAX_SECONDS = 3_600;
/** A `user` token's `sessions` claim holds at most this many grants. */
export const MAX_USER_GRANTS = 20;

/** A session grant of a `user` token: `prefix-*` reaches every session whose name starts with `prefix-`. */
export const sessionPattern = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,126}\*$/, "a session pattern is a name prefix followed by *");

/**
 * What a watch token opens: one session's watch, or one conversation's. The conversation is its id,
 * resolved when the token is minted, and `root: true` marks the session's root conversation, so the
 * token opens it whether the stream's path says `root` or the id.
 */
export const watchScope = z.strictObject({
  session: sessionName,
  conversation: z.string().min(1).max(20).optional(),
  root: z.literal(true).optional(),
});
export type WatchScope = z.infer<typeof watchScope>;

export const claims = z.looseObject({
  tenant: tenantName,
  role: z.enum(roles),
  /** The agent id, for agent tokens (the rig's agents). */
  agent: z.string().regex(NAME).optional(),
  /**
   * The sessions (of the token's tenant) the token may act in: required on agent tokens (an agent acts
   * in its rig, not in every rig of the tenant with an agent of its name); a token carrying it is
   * refused (401) on any other session's routes.
   */
  sessions: z
    .array(z.union([sessionName, sessionPattern]))
    .max(100)
    .optional(),
  /**
   * On a `user` token: it reaches only the sessions its `sessions` grants name, never its user's other sessions, and
   * creates none under a server-assigned name. Set when the minting token names its sessions (docs/users.md).
   */
  bounded: z.literal(true).optional(),
  /** The end user a `user` token acts for (required on user tokens): sessions it creates are owned by it. */
  sub: z.string().min(1).max(128).optional(),
  /** A `user` token's actions (absent: all); see `userActions`. */
  act: z.array(z.enum(userActions)).max(userActions.length).optional(),
  /** Every token expires (Unix seconds); its lifetime (exp - iat) is bounded by the configured maximum. */
  exp: z.number({ error: "every token carries exp (Unix seconds)" }).int(),
  iat: z.number().int().optional(),
  /** A watch token (`POST .../watch-token`) opens one watch and nothing else. */
  scope: z.literal("watch").optional(),
  watch: watchScope.optional(),
});

/** `POST .../watch-token`: the lifetime wanted (default WATCH_TOKEN_LIFETIME_SECONDS, 10 minutes). */
export const watchTokenBody = z.strictObject({
  ttlSeconds: z.number().int().min(1).max(86_400).optional(),
});
export type Claims = z.infer<typeof claims>;

/** `POST /v1/tokens` (operator): mint a `user` token for the product's end user `sub` (docs/users.md). */
export const mintTokenBody = z.strictObject({
  sub: z.string().min(1).max(128),
  act: z.array(z.enum(userActions)).min(1).max(userActions.length).optional(),
  sessions: z
    .array(z.union([sessionName, sessionPattern]))
    .max(MAX_USER_GRANTS)
    .optional(),
  ttlSeconds: z.number().int().min(1).max(USER_TOKEN_MAX_SECONDS).optional(),
});
export type MintTokenBody = z.input<typeof mintTokenBody>;

// ---------------------------------------------------------------------------------------------
// Schedules (§8.6)

/** The largest time a JavaScript Date holds (ms): a wire time beyond it is no time at all. */
const MAX_TIME_MS = 8.64e15;

export const scheduleBody = z
  .strictObject({
    /** The conversation each occurrence's input goes to: an id or "root" (default). */
    conversation: z.union([z.literal("root"), z.number().int().positive()]).optional(),
    input: z.string().min(1, "input must not be empty").max(100_000),
    every: z
      .number()
      .int()
      .min(1000, "every is at least 1,000 ms")
      .max(366 * 24 * 3600_000)
      .optional(),
    cron: z.string().min(1).max(200).optional(),
    timezone: z.string().min(1).max(100).optional(),
    /**
     * First occurrence (epoch ms or an ISO 8601 time), at most ten years ahead; default: one interval from now, or
     * cron's next time.
     */
    startAt: z
      .union([
        z.number().int().min(0).max(MAX_TIME_MS),
        z.iso.datetime({ offset: true }).transform((s) => Date.parse(s)),
      ])
      .optional(),
    mode: z.enum(["followUp", "steer", "nextRun"]).optional(),
    /** After downtime: "one" run for all the missed occurrences (default), or "none" (skip the gap). */
    catchUp: z.enum(["one", "none"]).optional(),
  })
  .refine((b) => (b.every === undefined) !== (b.cron === undefined), {
    message: "a schedule has exactly one of every and cron",
    path: ["every"],
  })
  .refine((b) => b.timezone === undefined || b.cron !== undefined, {
    message: "timezone applies to cron schedules only",
    path: ["timezone"],
  });
export type ScheduleBody = z.infer<typeof scheduleBody>;

/**
 * Pause or resume, and/or edit: the input, accept mode, catch-up policy, or the grid (`every`, or `cron`
 * with an optional `timezone`; a `timezone` alone changes a cron schedule's zone, null: UTC). The
 * schedule applies it in its own commit; a new grid plans its first occurrence from now.
 */
export const schedulePatch = z
  .strictObject({
    paused: z.boolean().optional(),
    input: z.string().min(1, "input must not be empty").max(100_000).optional(),
    mode: z.enum(["followUp", "steer", "nextRun"]).optional(),
    catchUp: z.enum(["one", "none"]).optional(),
    every: z
      .number()
      .int()
      .min(1000, "every is at least 1,000 ms")
      .max(366 * 24 * 3600_000)
      .optional(),
    cron: z.string().min(1).max(200).optional(),
    timezone: z.string().min(1).max(100).nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, {
    message: "nothing to change: give paused or a field to edit",
    path: ["paused"],
  })
  .refine((b) => b.every === undefined || b.cron === undefined, {
    message: "a schedule has exactly one of every and cron",
    path: ["every"],
  })
  .refine((b) => b.every === undefined || b.timezone === undefined || b.timezone === null, {
    message: "timezone applies to cron schedules only",
    path: ["timezone"],
  });
export type SchedulePatchBody = z.infer<typeof schedulePatch>;

export const schedulesQuery = z.strictObject({
  all: z.enum(["true", "false"]).optional(),
  after: cursorId.optional(),
  limit: limit.optional(),
});

/** The directory title and labels schemas, for the export header (src/api/transfer.ts). */
export const sessionTitle = title;
export const sessionLabels = labels;
