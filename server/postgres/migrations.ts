import "server-only";

/**
 * The schema, as numbered steps applied in order on start and recorded in `lockscope_migrations`. A step,
 * once released, never changes: a change is a new step. Each runs in its own transaction with its record.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: "audit entries",
    sql: `
      CREATE TABLE audit_entries (
        -- The entry id (\`<epoch ms>-<12 hex>\`): time-ordered as a string, so it is also the page cursor.
        id          text PRIMARY KEY,
        at          timestamptz NOT NULL,
        actor       text NOT NULL,
        role        text NOT NULL,
        action      text NOT NULL,
        resource    text NOT NULL,
        token       text,
        holder      jsonb,
        reason      text NOT NULL,
        outcome     text NOT NULL,
        nodes       jsonb NOT NULL,
        ip          text NOT NULL,
        user_agent  text,
        finished_at timestamptz
      );
      CREATE INDEX audit_entries_resource_id ON audit_entries (resource, id DESC);
    `,
  },
  {
    version: 2,
    name: "lock history",
    sql: `
      -- Every lifecycle event of every lock, as the consoles' live views saw it.
      CREATE TABLE lock_events (
        id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at       timestamptz NOT NULL,
        resource text NOT NULL,
        type     text NOT NULL,
        node     text,
        token    text,
        holder   text,
        fence    text,
        detail   text,
        -- Several consoles watch the same nodes and see the same event: it is stored once (see history/postgres.ts).
        dedup    bigint
      );
      CREATE INDEX lock_events_resource_at ON lock_events (resource, at DESC, id DESC);
      CREATE INDEX lock_events_at ON lock_events (at DESC, id DESC);
      CREATE UNIQUE INDEX lock_events_dedup ON lock_events (dedup) WHERE dedup IS NOT NULL;

      -- One row per hold (a lock value from acquired to its end), for "who held it at time T".
      CREATE TABLE lock_holds (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        resource    text NOT NULL,
        token       text NOT NULL,
        holder      text,
        fence       text,
        acquired_at timestamptz NOT NULL,
        ended_at    timestamptz,
        end_type    text
      );
      -- At most one open hold per value of a resource: where an end finds its hold.
      CREATE UNIQUE INDEX lock_holds_open ON lock_holds (resource, md5(token)) WHERE ended_at IS NULL;
      CREATE INDEX lock_holds_resource ON lock_holds (resource, acquired_at DESC, id DESC);
      CREATE INDEX lock_holds_ended ON lock_holds (ended_at) WHERE ended_at IS NOT NULL;
      -- "Held at T" is a containment query on the hold's interval.
      CREATE INDEX lock_holds_during ON lock_holds USING gist (tstzrange(acquired_at, ended_at, '[)'));
    `,
  },
  {
    version: 3,
    name: "audit deployment",
    sql: `
      -- A console may watch several deployments: a force release names the one it acted on (null: older entries, pattern changes).
      ALTER TABLE audit_entries ADD COLUMN deployment text;
    `,
  },
  {
    version: 4,
    name: "lock history deployment",
    sql: `
      -- A lock is (deployment, resource): the same key on two deployments is two locks, with two histories.
      -- Rows recorded before were the one deployment the environment variables describe.
      ALTER TABLE lock_events ADD COLUMN deployment text NOT NULL DEFAULT 'default';
      ALTER TABLE lock_holds ADD COLUMN deployment text NOT NULL DEFAULT 'default';
      -- The resource leads: one lock's pages (resource and deployment) are read in index order, and a resource
      -- asked about on every deployment is still found by the index.
      DROP INDEX lock_events_resource_at;
      CREATE INDEX lock_events_resource_at ON lock_events (resource, deployment, at DESC, id DESC);
      DROP INDEX lock_holds_resource;
      CREATE INDEX lock_holds_resource ON lock_holds (resource, deployment, acquired_at DESC, id DESC);
      -- At most one open hold per value of a lock: an end on one deployment never finds another's hold.
      DROP INDEX lock_holds_open;
      CREATE UNIQUE INDEX lock_holds_open ON lock_holds (deployment, resource, md5(token)) WHERE ended_at IS NULL;
    `,
  },
  {
    version: 5,
    name: "open holds apart",
    sql: `
      -- Holds not ended yet live in a table of their own; a hold moves to lock_holds when it ends, written there
      -- once with every index entry it will have. (Ending it by an UPDATE wrote each of its index entries twice,
      -- the GiST one included, and an end had to search an index that kept every ended hold until VACUUM.)
      CREATE TABLE lock_holds_current (
        -- A hold's id for good: it keeps it in lock_holds, so the two tables never share an id.
        id          bigint GENERATED ALWAYS AS IDENTITY,
        resource    text NOT NULL,
        deployment  text NOT NULL,
        token       text NOT NULL,
        holder      text,
        fence       text,
        acquired_at timestamptz NOT NULL
      );
      INSERT INTO lock_holds_current (id, resource, deployment, token, holder, fence, acquired_at) OVERRIDING SYSTEM VALUE
        SELECT id, resource, deployment, token, holder, fence, acquired_at FROM lock_holds WHERE ended_at IS NULL;
      SELECT setval(pg_get_serial_sequence('lock_holds_current', 'id'), coalesce((SELECT max(id) FROM lock_holds), 0) + 1, false);
      DELETE FROM lock_holds WHERE ended_at IS NULL;
      DROP INDEX lock_holds_open;
      -- Ids come from lock_holds_current from now on.
      ALTER TABLE lock_holds ALTER COLUMN id DROP IDENTITY;
      ALTER TABLE lock_holds ALTER COLUMN ended_at SET NOT NULL;
      -- At most one open hold per value of a lock (resource first: a resource asked about on every deployment).
      CREATE UNIQUE INDEX lock_holds_current_value ON lock_holds_current (resource, deployment, md5(token));
      -- Every lock held at T: the open holds acquired by T, newest first.
      CREATE INDEX lock_holds_current_acquired ON lock_holds_current (acquired_at DESC, id DESC);
    `,
  },
  {
    version: 6,
    name: "audit without the resource index",
    sql: `
      -- A B-tree entry holds about 2,700 bytes, and a lock key may be longer (1,024 characters of three or four
      -- bytes each): its force release could not be recorded, so it was refused. The audit's resource filter
      -- is a substring search (ILIKE '%…%'), which this index never served.
      DROP INDEX audit_entries_resource_id;
    `,
  },
  {
    version: 7,
    name: "lock history dedup across a window mark",
    sql: `
      -- An event two consoles see a moment apart is stored once. Its first key (\`dedup\`) takes its 10 s window; two
      -- sightings on either side of a window's mark had two keys and were both stored. The second key takes the
      -- same windows shifted by 5 s: sightings under 5 s apart share at least one of the two keys.
      ALTER TABLE lock_events ADD COLUMN dedup2 bigint;
      CREATE UNIQUE INDEX lock_events_dedup2 ON lock_events (dedup2) WHERE dedup2 IS NOT NULL;
    `,
  },
  {
    version: 8,
    name: "deployments watched",
    sql: `
      -- When a console last watched each deployment (every console notes its own hourly). The open holds of one no
      -- console has watched for a day (taken out of the configuration, renamed) are ended as \`unwatched\` then; no
      -- console would ever see their end. Those open now count as watched at this upgrade.
      CREATE TABLE history_deployments (
        name        text PRIMARY KEY,
        watched_at  timestamptz NOT NULL
      );
      INSERT INTO history_deployments (name, watched_at) SELECT DISTINCT deployment, now() FROM lock_holds_current;
    `,
  },
  {
    version: 9,
    name: "lock history by deployment",
    sql: `
      -- One deployment's events (\`GET /api/history?deployment=\`), newest first: without it the query read every other
      -- deployment's newer events to find them, past the statement timeout on a large history.
      CREATE INDEX lock_events_deployment_at ON lock_events (deployment, at DESC, id DESC);
    `,
  },
]);
