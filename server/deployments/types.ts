import "server-only";
import type Redis from "ioredis";
import type { Cluster, RedisOptions } from "ioredis";
import type { Deployment, DeploymentKind } from "@/lib/deployment-config";

/** One endpoint the console watches and acts on, as a deployment kind opens it. */
export interface DeploymentEndpoint {
  /** How the endpoint is shown (API, logs): never a password. */
  label: string;
  /** A URL other processes may dial (the lab's workers); null where there is none to dial directly. */
  url: string | null;
  /** Opens a new connection to the endpoint with the console's options on top of the kind's own (a cluster client for a cluster). */
  connect: (options: RedisOptions) => LockClient;
  /** A cluster's: opens a connection to one of its nodes by the address the cluster announces. */
  connectTo?: (host: string, port: number, options: RedisOptions) => Redis;
}

/** A connection to a lock node: one instance, or a whole cluster (a cluster client routes each key to its slot's primary). */
export type LockClient = Redis | Cluster;

/**
 * One kind of lock deployment (a Redlock set, a standalone instance, a Sentinel-managed primary, a
 * cluster): how its endpoints are opened, and how many of them must agree on a lock. Adding a kind is
 * adding a file beside this one and naming it in `index.ts`.
 */
export interface DeploymentDriver<K extends DeploymentKind = DeploymentKind> {
  kind: K;
  /** The endpoints, in order; their index is the node index the live view and the API use. */
  endpoints(deployment: Extract<Deployment, { kind: K }>): DeploymentEndpoint[];
}
