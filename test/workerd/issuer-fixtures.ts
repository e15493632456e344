/**
 * A local identity provider for the JWKS tests: key pairs made in the test (jose's generateKeyPair),
 * the public half served as a JWKS through the host's fetch seam (`fetch`, which counts every fetch of
 * the set), and tokens signed like a provider would sign them.
 */
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";

export type ProviderAlg = "RS256" | "ES256" | "EdDSA";

let providers = 0;

export class LocalProvider {
  readonly issuer: string;
  readonly jwksUri: string;
  readonly audience = "pico-api";
  /** Fetches of the JWKS that reached this provider. */
  fetches = 0;
  cacheControl = "max-age=600";
  /** The public keys the JWKS serves. */
  readonly served: JWK[] = [];
  readonly #keys = new Map<string, { readonly alg: ProviderAlg; readonly privateKey: CryptoKey }>();

  constructor(label: string) {
    providers += 1;
    const host = `${label}-${Date.now().toString(36)}-${providers}.idp.test`;
    this.issuer = `https://${host}/`;
    this.jwksUri = `https://${host}/.well-known/jwks.json`;
  }

  /** A new key pair; `publish: false` keeps it out of the JWKS (a key the provider never announced). */
  async addKey(kid: string, alg: ProviderAlg = "RS256", options: { readonly publish?: boolean } = {}): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(alg);
    this.#keys.set(kid, { alg, privateKey });
    if (options.publish !== false) this.served.push({ ...(await exportJWK(publicKey)), kid, alg, use: "sig" });
    return kid;
  }

  /**
   * A token signed with `kid` (named in its header unless `headerKid: false`): iss, aud, iat and a 10-minute exp unless
   * `claims` say otherwise.
   */
  async sign(
    kid: string,
    claims: Record<string, unknown>,
    now: number,
    options: { readonly headerKid?: boolean } = {},
  ): Promise<string> {
    const key = this.#keys.get(kid);
    if (key === undefined) throw new Error(`no key ${kid}`);
    const seconds = Math.floor(now / 1000);
    const header = options.headerKid === false ? { alg: key.alg } : { alg: key.alg, kid };
    return new SignJWT({ iss: this.issuer, aud: this.audience, iat: seconds, exp: seconds + 600, ...claims })
      .setProtectedHeader(header)
      .sign(key.privateKey);
  }

  /** What the fetch seam answers for this provider's JWKS, or undefined for another URL. */
  answer(request: Request): Response | undefined {
    if (request.url !== this.jwksUri) return undefined;
    this.fetches += 1;
    return Response.json({ keys: this.served }, { headers: { "cache-control": this.cacheControl } });
  }

  /** The body of `PUT /v1/issuers/{name}` for this provider. */
  registration(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { issuer: this.issuer, jwksUri: this.jwksUri, audience: this.audience, ...extra };
  }
}

/** A fetch seam serving these providers' JWKS (404 for anything else). */
export function providerFetch(list: readonly LocalProvider[]): (request: Request) => Promise<Response> {
  return (request) => {
    for (const provider of list) {
      const response = provider.answer(request);
      if (response !== undefined) return Promise.resolve(response);
    }
    return Promise.resolve(new Response("not found", { status: 404 }));
  };
}

/** A JWT with `alg: none` and no signature. */
export function unsignedToken(claims: Record<string, unknown>): string {
  const part = (value: unknown): string =>
    btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
}
