import Link from "next/link";
import { lockHref } from "./format";

/** One link per deployment for a resource the console cannot place on one (a 409 naming the deployments). */
export function DeploymentChoices({ resource, deployments, label }: { resource: string; deployments: readonly string[]; label: string }) {
  return (
    <ul aria-label={label}>
      {deployments.map((name) => (
        <li key={name}>
          <Link href={lockHref(resource, name)}>
            {resource} on {name}
          </Link>
        </li>
      ))}
    </ul>
  );
}
