import "server-only";
import type { Deployment } from "@/lib/deployment-config";
import { clusterDriver } from "./cluster";
import { redlockDriver } from "./redlock";
import { sentinelDriver } from "./sentinel";
import { standaloneDriver } from "./standalone";
import type { DeploymentEndpoint } from "./types";

export type { DeploymentEndpoint, LockClient } from "./types";

/** The endpoints of a deployment, through its kind's driver. */
export function endpointsOf(deployment: Deployment): DeploymentEndpoint[] {
  switch (deployment.kind) {
    case "redlock":
      return redlockDriver.endpoints(deployment);
    case "standalone":
      return standaloneDriver.endpoints(deployment);
    case "sentinel":
      return sentinelDriver.endpoints(deployment);
    case "cluster":
      return clusterDriver.endpoints(deployment);
  }
}

/**
 * Whether another process can reach the deployment's nodes by their URLs alone (what the lab's workers do):
 * not for Sentinel (no URL), nor where TLS files or credentials outside the URLs are needed.
 */
export function reachableByUrls(deployment: Deployment | undefined): boolean {
  if (!deployment) return true;
  if (deployment.kind !== "redlock" && deployment.kind !== "standalone") return false;
  return deployment.tls === null && deployment.auth.username === null && deployment.auth.passwordFile === null;
}
