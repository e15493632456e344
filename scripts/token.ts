/**
 * `npm run token -- --tenant T --role R [--agent A] [--session S] [--ttl SECONDS]` prints a bearer token
 * (HS256, signed with JWT_SECRET from the environment or .dev.vars) for the HTTP API. Roles: client,
 * operator, mayor, agent (agent tokens carry --agent, and --session: the session, or comma-separated
 * sessions, the agent may act in; on any other session the token is refused). --session on another
 * role's token restricts it the same way. Every token carries `exp`; the default lifetime is 24 hours, and a
 * --ttl above TOKEN_MAX_LIFETIME_SECONDS (environment, default 86400: what the Worker accepts) is refused.
 */
import { sign } from "hono/jwt";
import { devSecret, flags } from "./dev-secrets.ts";

const ROLES = ["client", "operator", "mayor", "agent"];
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** The rig's role names, never agent ids (src/rig/types.ts RESERVED_NAMES). */
const RESERVED = ["mayor", "witness", "operator"];

try {
  const args = flags(process.argv.slice(2));
  const tenant = args.get("tenant");
  const role = args.get("role") ?? "client";
  const agent = args.get("agent");
  const sessions = args.get("session")?.split(",");
  const ttl = Number(args.get("ttl") ?? Math.min(86_400, Number(process.env["TOKEN_MAX_LIFETIME_SECONDS"] ?? 86_400)));
  if (tenant === undefined || !NAME.test(tenant)) throw new Error("--tenant is required: 1-128 characters of A-Z a-z 0-9 _ . -");
  if (!ROLES.includes(role)) throw new Error(`--role must be one of ${ROLES.join(", ")}`);
  if (role === "agent" && (agent === undefined || !NAME.test(agent))) throw new Error("an agent token needs --agent <id>");
  if (sessions !== undefined && !sessions.every((s) => NAME.test(s))) throw new Error("--session is a session name (1-128 characters of A-Z a-z 0-9 _ . -), or several separated by commas");
  if (role === "agent" && sessions === undefined) throw new Error("an agent token needs --session <session>: the session (rig) it may act in");
  if (role === "agent" && RESERVED.includes(agent ?? "")) throw new Error(`--agent ${agent}: ${RESERVED.join(", ")} are reserved names, not agent ids`);
  const max = Number(process.env["TOKEN_MAX_LIFETIME_SECONDS"] ?? 86_400);
  if (!Number.isSafeInteger(ttl) || ttl <= 0) throw new Error("--ttl is a positive number of seconds");
  if (ttl > max) throw new Error(`--ttl ${ttl} is above the maximum token lifetime of ${max} s (TOKEN_MAX_LIFETIME_SECONDS); the Worker would refuse it`);
  const now = Math.floor(Date.now() / 1000);
  const token = await sign({ tenant, role, ...(agent === undefined ? {} : { agent }), ...(sessions === undefined ? {} : { sessions }), iat: now, exp: now + ttl }, devSecret("JWT_SECRET"), "HS256");
  process.stdout.write(`${token}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
