import { Fragment } from "react";

/** A run this long with no separator in it may break anywhere, as a last resort ("a1b2c3…" wider than its column). */
const LONGEST_UNBROKEN = 20;

/**
 * A name (an actor, a holder's label and host) that may wrap only after its separators ("-", "_", ".", "@", ":", "/")
 * or at its spaces, so "settlement-reconciliation-oncall-bot@payments.example" breaks as "settlement-reconciliation-" /
 * "oncall-bot@payments." / "example", never as "exam" / "ple". Its cell must not break words on its own
 * (`overflow-wrap: break-word`, not `anywhere`): only a run longer than `LONGEST_UNBROKEN` characters without a
 * separator breaks anywhere. The text reads and copies as it is: `<wbr>` adds no character.
 */
export function BreakableName({ text }: { text: string }) {
  // Each part ends with its separator (or is the name's last part).
  const parts = text.match(/[^-_.@:/\s]*(?:[-_.@:/]+|\s+|$)/g)?.filter((p) => p !== "") ?? [text];
  return (
    <>
      {parts.map((part, i) => {
        const word = part.trimEnd();
        const body = word.replace(/[-_.@:/]+$/, "");
        return (
          <Fragment key={i}>
            {body.length > LONGEST_UNBROKEN ? <span className="break-anywhere">{part}</span> : part}
            {i < parts.length - 1 && part === word && <wbr />}
          </Fragment>
        );
      })}
    </>
  );
}
