/**
 * Text as the lock history stores it (key names and values may hold anything): no NUL byte, which PostgreSQL's
 * text refuses, and no lone UTF-16 surrogate (JSON would carry it as an escape that PostgreSQL refuses); each
 * becomes U+FFFD. A stored key or value is compared with a live one in this form.
 */
export function storedText(text: string): string;
export function storedText(text: string | null | undefined): string | null;
export function storedText(text: string | null | undefined): string | null {
  return text === null || text === undefined ? null : text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\uFFFD");
}
