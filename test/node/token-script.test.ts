/**
 * `npm run token` for user tokens (docs/users.md "Minting user tokens"): the script run as `npm run token`
 * runs it (Node 22 with type stripping), with JWT_SECRET from the environment.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const node = existsSync(join("node_modules", ".bin", "node")) ? join("node_modules", ".bin", "node") : process.execPath;

function run(...args: string[]): { readonly status: number | null; readonly stdout: string; readonly stderr: string } {
  const result = spawnSync(node, [join("scripts", "token.ts"), ...args], {
    encoding: "utf8",
    env: { ...process.env, JWT_SECRET: "a-test-secret-of-enough-length" },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function payload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.trim().split(".")[1] ?? "", "base64url").toString("utf8")) as Record<
    string,
    unknown
  >;
}

describe("npm run token --role user", () => {
  it("signs a user token of at most an hour with its sub, actions and grants, and refuses a longer one", () => {
    const minted = run(
      "--tenant",
      "acme",
      "--role",
      "user",
      "--sub",
      "user-42",
      "--act",
      "read,watch",
      "--session",
      "shared-*,room-1",
    );
    expect(minted.status, minted.stderr).toBe(0);
    const claims = payload(minted.stdout);
    expect(claims).toMatchObject({
      tenant: "acme",
      role: "user",
      sub: "user-42",
      act: ["read", "watch"],
      sessions: ["shared-*", "room-1"],
    });
    expect(Number(claims["exp"]) - Number(claims["iat"])).toBe(3600);
    for (const args of [["--ttl", "3601", "--sub", "u"], [], ["--sub", "u", "--act", "read,delete"]]) {
      const refused = run("--tenant", "acme", "--role", "user", ...args);
      expect(refused.status, args.join(" ")).toBe(1);
      expect(refused.stdout).toBe("");
    }
    // A pattern is a user token's grant only.
    expect(run("--tenant", "acme", "--role", "client", "--session", "shared-*").status).toBe(1);
  });
});
