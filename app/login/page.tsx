import { LoginForm } from "@/components/login-form";

export const metadata = { title: "Sign in · Lockscope" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  const next = typeof params.next === "string" && params.next.startsWith("/") && !params.next.startsWith("//") ? params.next : "/";
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
