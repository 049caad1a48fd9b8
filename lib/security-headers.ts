/**
 * The security headers the console sends on every response. Pure: the proxy (`proxy.ts`) and the raw
 * request-line guard both use them, so a page, a route and a refused request carry the same policy.
 */

/** For JSON, text and the event stream: nothing in them may run, be framed or be sniffed into HTML. */
export const API_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Headers that do not depend on the page: sent on every response. */
export const BASE_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "X-Content-Type-Options": "nosniff",
  // Lock keys travel in paths (`/locks/lock%3Aorders%2F42`): they must not leave in a Referer.
  "Referrer-Policy": "no-referrer",
  // For browsers that predate `frame-ancestors`.
  "X-Frame-Options": "DENY",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Resource-Policy": "same-origin",
});

export const HSTS_VALUE = "max-age=31536000";

export interface PagePolicyOptions {
  /** A fresh random value per response; Next.js puts it on the scripts and styles it renders. */
  nonce: string;
  /** `next dev` only: React's dev build needs `eval` for its error overlay and hot reload for inline styles. */
  development: boolean;
  /** The public origin is https: ask the browser to upgrade anything still addressed over http. */
  https: boolean;
}

/**
 * The policy for HTML pages. Scripts run only from this origin or with this response's nonce (Next.js's
 * inline bootstrap and flight data carry it); no `unsafe-eval` outside development. Style attributes are
 * allowed (`style-src-attr`): the components set widths and colours inline, and an attribute cannot run code.
 */
export function pageContentSecurityPolicy({ nonce, development, https }: PagePolicyOptions): string {
  const directives = [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}'${development ? " 'unsafe-eval'" : ""}`,
    `style-src 'self' ${development ? "'unsafe-inline'" : `'nonce-${nonce}'`}`,
    "style-src-attr 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    ...(https ? ["upgrade-insecure-requests"] : []),
  ];
  return directives.join("; ");
}

/** Puts the security headers on a response: the page policy for pages, the API policy otherwise. */
export function setSecurityHeaders(headers: Headers, options: { pagePolicy?: string; https: boolean }): void {
  for (const [name, value] of Object.entries(BASE_SECURITY_HEADERS)) headers.set(name, value);
  headers.set("Content-Security-Policy", options.pagePolicy ?? API_CONTENT_SECURITY_POLICY);
  if (options.https) headers.set("Strict-Transport-Security", HSTS_VALUE);
}
