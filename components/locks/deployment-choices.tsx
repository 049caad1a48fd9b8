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

/** The filter by deployment of a table where the console watches several (`""`: all of them). */
export function DeploymentSelect({ deployments, value, onChange }: { deployments: readonly string[]; value: string; onChange: (deployment: string) => void }) {
  return (
    <label className="filter">
      <span className="sr-only">Deployment</span>
      <select aria-label="Deployment" value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="">All deployments</option>
        {deployments.map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
      </select>
    </label>
  );
}
