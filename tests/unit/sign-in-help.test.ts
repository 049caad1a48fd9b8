import { describe, expect, it } from "vitest";
import { signInHelp } from "@/lib/sign-in-help";

describe("the sign-in page's line on where the tokens come from", () => {
  it("names the variable where the operator token is set in the environment, and claims no printing or file", () => {
    const text = signInHelp({ operator: "environment", defaultDataDir: true, viewerToken: true });
    expect(text).toBe("Use the operator token, the one set in `LOCKSCOPE_OPERATOR_TOKEN` where the console runs, or the viewer token (`LOCKSCOPE_VIEWER_TOKEN`) to read only.");
    expect(text).not.toMatch(/printed|operator-token`/);
  });

  it("says a generated operator token was printed at the first start and where its file is, in the default data folder or another", () => {
    expect(signInHelp({ operator: "generated", defaultDataDir: true, viewerToken: true })).toBe(
      "Use the operator token, generated at the console's first start, printed then, and kept in `.lockscope/operator-token` in the console's folder, or the viewer token (`LOCKSCOPE_VIEWER_TOKEN`) to read only.",
    );
    expect(signInHelp({ operator: "generated", defaultDataDir: false, viewerToken: true })).toBe(
      "Use the operator token, generated at the console's first start, printed then, and kept in the file `operator-token` in its data folder (`LOCKSCOPE_DATA_DIR`), or the viewer token (`LOCKSCOPE_VIEWER_TOKEN`) to read only.",
    );
  });

  it("offers no viewer token where none is set: reading is open then", () => {
    expect(signInHelp({ operator: "environment", defaultDataDir: true, viewerToken: false })).toBe(
      "Use the operator token, the one set in `LOCKSCOPE_OPERATOR_TOKEN` where the console runs. Reading needs no token on this console: sign in to act as an operator.",
    );
    expect(signInHelp({ operator: "generated", defaultDataDir: true, viewerToken: false })).not.toContain("viewer token");
  });
});
