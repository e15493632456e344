/**
 * The server's side of the rig's wire schemas: the schemas themselves (src/api/rig.ts, re-exported) and
 * the `If-Match` header reader, which answers a Problem.
 */
import { Problem } from "../problems.js";

export * from "../../api/rig.js";

/** `If-Match: "<version>"` (or `*`: no condition); anything else is a 400 naming the header. */
export function ifMatch(header: string | undefined): number | undefined {
  if (header === undefined || header.trim() === "*") return undefined;
  const match = /^"([1-9][0-9]{0,15})"$/.exec(header.trim());
  if (match === null)
    throw new Problem("invalid_header", 'If-Match is a hook ETag this server sent ("<version>")', "if-match");
  return Number(match[1]);
}
