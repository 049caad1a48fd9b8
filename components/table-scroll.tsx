import type { ReactNode, Ref } from "react";

/**
 * A box a wide table scrolls sideways in, so the page never does. It is a named, focusable region: a keyboard
 * user can focus it and scroll it with the arrow keys, and a screen reader announces what it holds.
 */
export function TableScroll({ label, children, ref }: { label: string; children: ReactNode; ref?: Ref<HTMLDivElement> }) {
  return (
    <div ref={ref} className="table-scroll" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}

/**
 * A table's header: one row of column headers, in order. An entry that is `false` or null is a column not
 * shown (`showDeployment && "Deployment"`).
 */
export function TableHead({ columns }: { columns: ReadonlyArray<ReactNode> }) {
  return (
    <thead>
      <tr>
        {columns.map((column, i) =>
          column === false || column === null || column === undefined ? null : (
            <th key={i} scope="col">
              {column}
            </th>
          ),
        )}
      </tr>
    </thead>
  );
}
