/** Where this console's tokens come from, as the sign-in page tells them (never a token, nor a file's content). */
export interface TokenSources {
  /** The operator token: set in `LOCKSCOPE_OPERATOR_TOKEN`, or generated at the first start and kept in the data folder. */
  operator: "environment" | "generated";
  /** Whether the data folder is the default one (`.lockscope`), so the generated token's file has its usual path. */
  defaultDataDir: boolean;
  /** Whether `LOCKSCOPE_VIEWER_TOKEN` is set: without it reading is open and there is no viewer token. */
  viewerToken: boolean;
}

/** The sign-in page's line on which token to use and where it is found; names quoted Markdown-style. */
export function signInHelp(sources: TokenSources): string {
  const operator =
    sources.operator === "environment"
      ? "Use the operator token, the one set in `LOCKSCOPE_OPERATOR_TOKEN` where the console runs"
      : `Use the operator token, generated at the console's first start, printed then, and kept in ${
          sources.defaultDataDir ? "`.lockscope/operator-token` in the console's folder" : "the file `operator-token` in its data folder (`LOCKSCOPE_DATA_DIR`)"
        }`;
  return sources.viewerToken
    ? `${operator}, or the viewer token (\`LOCKSCOPE_VIEWER_TOKEN\`) to read only.`
    : `${operator}. Reading needs no token on this console: sign in to act as an operator.`;
}
