import { z } from "zod";
import { getSession, signIn, signOut } from "@/server/session";
import { actorNameAllowed } from "@/server/auth";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const SignInBody = z.strictObject({
  // No token has a space or a line break (configured ones are printable ASCII without spaces, generated ones base64url):
  // around it they come from the paste, and would make the right token a wrong one, counted towards the limit.
  token: z.string().trim().min(1, "the token is required").max(512, "the token is at most 512 characters"),
  name: z
    .string()
    .max(64, "the name is at most 64 characters")
    // (A name too long is told so, not also that its characters are wrong.)
    .refine((name) => name.length > 64 || actorNameAllowed(name), "the name is letters, digits, spaces and . _ @ - only")
    .optional(),
});

// GET /api/session: who the browser is signed in as (role and actor), or 401.
export const GET = route({ name: "GET /api/session", access: "public" }, ({ principal }) => getSession(principal));

// POST /api/session: sign in with a token; sets the httpOnly, SameSite=Strict session cookie. Wrong tokens are rate limited.
export const POST = route({ name: "POST /api/session", access: "public", body: SignInBody }, ({ request, body }) =>
  signIn(request, body.token, body.name),
);

// DELETE /api/session: sign out; clears the cookie and revokes the session on every console. A bearer token sent
// beside the cookie is not read: wrong, or from an address past the wrong-token limit, it must not keep the session.
export const DELETE = route({ name: "DELETE /api/session", access: "probe" }, ({ request }) => signOut(request));
