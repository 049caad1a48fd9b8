import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { BreakableName } from "@/components/breakable-name";

const html = (text: string) => renderToStaticMarkup(createElement(BreakableName, { text }));

describe("BreakableName", () => {
  it("lets a name wrap after each of its separators, and nowhere else", () => {
    expect(html("settlement-reconciliation-oncall-bot@payments-7f3a9c.example")).toBe(
      "settlement-<wbr/>reconciliation-<wbr/>oncall-<wbr/>bot@<wbr/>payments-<wbr/>7f3a9c.<wbr/>example",
    );
    expect(html("svc_user:deploy/eu")).toBe("svc_<wbr/>user:<wbr/>deploy/<wbr/>eu");
  });

  it("adds nothing at spaces, which wrap already, nor after a run of separators", () => {
    expect(html("flash-sale (web-1 pid 42)")).toBe("flash-<wbr/>sale (web-<wbr/>1 pid 42)");
    expect(html("a--b")).toBe("a--<wbr/>b");
  });

  it("keeps every character as it was", () => {
    for (const name of ["alice", "", "-leading", "trailing.", "two  spaces", "ünïcode-näme@host"]) {
      expect(html(name).replace(/<wbr\/>/g, "").replace(/<[^>]+>/g, "").replace(/&amp;/g, "&")).toBe(name);
    }
  });

  it("lets only a run of more than 20 characters with no separator break anywhere, as the last resort", () => {
    expect(html("ops-0123456789abcdef0123456789")).toBe('ops-<wbr/><span class="break-anywhere">0123456789abcdef0123456789</span>');
    expect(html("ops-0123456789abcdef0123")).toBe("ops-<wbr/>0123456789abcdef0123");
  });
});
