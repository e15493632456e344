/**
 * `npm run token -- --tenant T --role R [--agent A] [--session S] [--ttl SECONDS]` prints a bearer token
 * (HS256, signed with JWT_SECRET from the environment or .dev.vars) for the HTTP API. Roles: client,
 * operator, mayor, agent, user (agent tokens carry --agent, and --session: the session, or comma-separated
 * sessions, the agent may act in; on any other session the token is refused). --session on another
 * role's token restricts it the same way. Every token carries `exp`; the default lifetime is 24 hours, and a
 * --ttl above TOKEN_MAX_LIFETIME_SECONDS (environment, default 86400: what the Worker accepts) is refused.
 *
 * A user token (docs/users.md: `--role user --sub U [--act read,watch] [--session s1,prefix-*]`) acts for
 * the end user U: its default lifetime is 3600 s, and a --ttl above it is refused (the Worker would
 * refuse the token); --session holds grants (names or prefix-* patterns, at most 20). A user creates
 * sessions only from one of the tenant's templates: `{ "template": "<name>" }` in the create body.
 */
import { sign } from "hono/jwt";
import { devSecret, flags } from "./dev-secrets.ts";

const ROLES = ["client", "operator", "mayor", "agent", "user"];
const ACTIONS = ["read", "write", "watch", "fork", "create"];
/** A user token's longest lifetime (src/api/schemas.ts USER_TOKEN_MAX_SECONDS). */
const USER_MAX = 3_600;
const PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,126}\*$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** The rig's role names, never agent ids (src/rig/types.ts RESERVED_NAMES). */
const RESERVED = ["mayor", "witness", "operator"];

try {
  const args = flags(process.argv.slice(2));
  const tenant = args.get("tenant");
  const role = args.get("role") ?? "client";
  const agent = args.get("agent");
  const sessions = args.get("session")?.split(",");
  const sub = args.get("sub");
  const act = args.get("act")?.split(",");
  const ttl = Number(
    args.get("ttl") ??
      Math.min(role === "user" ? USER_MAX : 86_400, Number(process.env["TOKEN_MAX_LIFETIME_SECONDS"] ?? 86_400)),
  );
  if (tenant === undefined || !NAME.test(tenant))
    throw new Error("--tenant is required: 1-128 characters of A-Z a-z 0-9 _ . -");
  if (!ROLES.includes(role)) throw new Error(`--role must be one of ${ROLES.join(", ")}`);
  if (role === "agent" && (agent === undefined || !NAME.test(agent)))
    throw new Error("an agent token needs --agent <id>");
  if (role === "user") {
    if (sub === undefined || sub.length < 1 || sub.length > 128)
      throw new Error("a user token needs --sub <end user>: 1-128 characters");
    if (act !== undefined && !act.every((a) => ACTIONS.includes(a)))
      throw new Error(`--act is a comma-separated subset of ${ACTIONS.join(", ")}`);
    if (sessions !== undefined && (sessions.length > 20 || !sessions.every((s) => NAME.test(s) || PATTERN.test(s)))) {
      throw new Error(
        "--session on a user token is at most 20 session names or prefix-* patterns, separated by commas",
      );
    }
    if (Number.isSafeInteger(ttl) && ttl > USER_MAX)
      throw new Error(`--ttl ${ttl}: a user token lives at most ${USER_MAX} s; the Worker would refuse it`);
  } else if (sub !== undefined || act !== undefined)
    throw new Error("--sub and --act are for user tokens (--role user)");
  if (role !== "user" && sessions !== undefined && !sessions.every((s) => NAME.test(s)))
    throw new Error(
      "--session is a session name (1-128 characters of A-Z a-z 0-9 _ . -), or several separated by commas",
    );
  if (role === "agent" && sessions === undefined)
    throw new Error("an agent token needs --session <session>: the session (rig) it may act in");
  if (role === "agent" && RESERVED.includes(agent ?? ""))
    throw new Error(`--agent ${agent}: ${RESERVED.join(", ")} are reserved names, not agent ids`);
  const max = Number(process.env["TOKEN_MAX_LIFETIME_SECONDS"] ?? 86_400);
  if (!Number.isSafeInteger(ttl) || ttl <= 0) throw new Error("--ttl is a positive number of seconds");
  if (ttl > max)
    throw new Error(
      `--ttl ${ttl} is above the maximum token lifetime of ${max} s (TOKEN_MAX_LIFETIME_SECONDS); the Worker would refuse it`,
    );
  const now = Math.floor(Date.now() / 1000);
  const user = role === "user" ? { sub, ...(act === undefined ? {} : { act }) } : {};
  const token = await sign(
    {
      tenant,
      role,
      ...user,
      ...(agent === undefined ? {} : { agent }),
      ...(sessions === undefined ? {} : { sessions }),
      iat: now,
      exp: now + ttl,
    },
    devSecret("JWT_SECRET"),
    "HS256",
  );
  process.stdout.write(`${token}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
