/** Browser-side helpers for the console's own API (same origin, session cookie). */
export class ApiRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiRequestError";
  }
}

export async function apiFetch<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(path, {
    ...init,
    headers: { Accept: "application/json", ...(init?.body ? { "Content-Type": "application/json" } : {}), ...init?.headers },
    credentials: "same-origin",
  });
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? (JSON.parse(text) as unknown) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data as { error?: { code?: string; message?: string; details?: unknown } } | null)?.error;
    throw new ApiRequestError(response.status, error?.code ?? "http_error", error?.message ?? `HTTP ${response.status}`, error?.details);
  }
  return data as T;
}

/** An API refusal in a page's words: there a 401 means the reader's session has ended (the API's own message speaks to scripts). */
export function errorText(error: unknown): string {
  if (error instanceof ApiRequestError && error.status === 401) return "You are not signed in, or your session has ended: sign in again, then try once more.";
  return error instanceof Error ? error.message : String(error);
}
