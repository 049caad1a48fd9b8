import { LoginForm } from "@/components/login-form";
import { sameOriginPath } from "@/lib/safe-redirect";

export const metadata = { title: "Sign in · Lockscope" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  // Any origin serves to tell a path of this console from one that leaves it; the form checks again
  // against the browser's real origin before it navigates.
  const next = sameOriginPath(typeof params.next === "string" ? params.next : null, "http://lockscope.invalid");
  return (
    <section>
      <h1>Sign in</h1>
      <p className="muted">
        Use the operator token (printed at start and kept in <code>.lockscope/operator-token</code>) or the viewer token.
      </p>
      <LoginForm next={next} />
    </section>
  );
}
