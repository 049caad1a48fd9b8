import { LoginForm } from "@/components/login-form";
import { MessageText } from "@/components/message-text";
import { CONFIG_DEFAULTS } from "@/lib/config";
import { sameOriginPath } from "@/lib/safe-redirect";
import { signInHelp } from "@/lib/sign-in-help";
import { getConfig } from "@/server/config";

export const metadata = { title: "Sign in · Lockscope" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  // Any origin serves to tell a path of this console from one that leaves it; the form checks again
  // against the browser's real origin before it navigates.
  const next = sameOriginPath(typeof params.next === "string" ? params.next : null, "http://lockscope.invalid");
  // Where this console's tokens come from (as server/auth.ts decides): whether each is set, never its value.
  const config = getConfig();
  const help = signInHelp({
    operator: config.operatorToken ? "environment" : "generated",
    defaultDataDir: config.dataDir === CONFIG_DEFAULTS.dataDir,
    viewerToken: config.viewerToken !== null,
  });
  return (
    <section>
      <h1>Sign in</h1>
      <p className="muted">
        <MessageText text={help} />
      </p>
      <LoginForm next={next} />
    </section>
  );
}
