/**
 * Sessions on a cluster of runners (`@effect/cluster`, its runner and message storage in the same
 * Postgres database as the event log). A session is a `Session` entity; submitting it sends one
 * persisted `Run` message to it, which the cluster delivers to the runner that owns the entity's
 * shard. When that runner dies, its shards move to live runners and the message is delivered
 * again there: the handler goes on from the session's log (a resume), so what ran before is not
 * run twice. The message counts as done only once the handler returns (its reply is stored); a
 * handler interrupted because its runner gives the shard up, or cut off by the runner's death,
 * leaves it unanswered, and the next owner of the shard reads it again. A handler that dies is
 * retried by the cluster with a backoff, so `run` must die only on what may pass (the database
 * unreachable) and return an outcome for the rest. Each runner keeps a row per session in `muse_cluster_sessions` (runner, state), which
 * `sessions` lists.
 *
 * @example
 * ```ts
 * import { SessionCluster } from "@musekit/pg"
 *
 * // a runner: serves the Session entity until interrupted
 * // Layer.launch(SessionCluster.runner({ url, host: "10.0.0.5", port: 34431, run: (job, ctx) => … }))
 * // anywhere else: start a session on whichever runner owns it
 * // yield* SessionCluster.submit(url, { session: "2026…", task: "fix the test", repo: "https://…", base: "9f1c…" })
 * ```
 */
import { ClusterSchema, Entity, RunnerAddress, type ShardingConfig } from "@effect/cluster"
import { NodeClusterSocket } from "@effect/platform-node"
import { Rpc } from "@effect/rpc"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Schedule, Schema } from "effect"
import * as EventLogPg from "./EventLogPg.js"

/** What a runner needs to start (or take over) a session. */
export const Job = Schema.Struct({
  /** The session's id, chosen when it was submitted. */
  session: Schema.String,
  task: Schema.String,
  /** A git URL or a path every runner can clone from. */
  repo: Schema.String,
  /** The commit the session starts from (every runner clones this one). */
  base: Schema.String,
  /** Extra `muse run` flags (approval mode, sandbox, model, script). */
  args: Schema.Array(Schema.String)
})
export type Job = typeof Job.Type

/** A session id: what every runner may use as a folder name. */
export const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/**
 * Why a `Run` message must not run, or `undefined`. Anything that can reach the database or a
 * runner's port can send one, so the handler checks it before it touches a folder or runs git: the
 * session id names the entity it was sent to and is a plain name, the base is a full commit id,
 * the repository is not an option, and the extra flags are not options that read or run files.
 */
export const jobProblem = (job: Job, entityId: string): string | undefined => {
  if (!SESSION_ID.test(job.session)) return `session id ${JSON.stringify(job.session)} is not a plain name`
  if (job.session !== entityId)
    return `session ${JSON.stringify(job.session)} sent to entity ${JSON.stringify(entityId)}`
  if (!/^[0-9a-f]{40}$/.test(job.base)) return `base ${JSON.stringify(job.base)} is not a commit id`
  if (job.repo.startsWith("-") || job.repo.trim() === "")
    return `repository ${JSON.stringify(job.repo)} is not a location`
  return undefined
}

/** How a runner's run of a session ended. */
export const Outcome = Schema.Struct({ status: Schema.String, exitCode: Schema.Number })
export type Outcome = typeof Outcome.Type

export const Run = Rpc.make("Run", { payload: Job, success: Outcome }).annotate(ClusterSchema.Persisted, true)

/** The entity a session is: its id is the session's id. */
export const SessionEntity = Entity.make("Session", [Run])

/**
 * Shard lock timings (milliseconds). The cluster's defaults suit a data centre; tests shorten them
 * so a dead runner's shards move in seconds.
 */
export interface Timings {
  readonly lockRefreshMs?: number | undefined
  readonly lockExpirationMs?: number | undefined
  readonly pollMs?: number | undefined
}

/** Timings from `MUSE_CLUSTER_LOCK_REFRESH_MS`, `MUSE_CLUSTER_LOCK_EXPIRATION_MS`, `MUSE_CLUSTER_POLL_MS`. */
export const timingsFromEnv = (env: NodeJS.ProcessEnv): Timings => {
  const n = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : undefined)
  return {
    lockRefreshMs: n(env.MUSE_CLUSTER_LOCK_REFRESH_MS),
    lockExpirationMs: n(env.MUSE_CLUSTER_LOCK_EXPIRATION_MS),
    pollMs: n(env.MUSE_CLUSTER_POLL_MS)
  }
}

const shardingConfig = (timings: Timings): Partial<ShardingConfig.ShardingConfig["Type"]> => ({
  ...(timings.lockRefreshMs !== undefined ? { shardLockRefreshInterval: `${timings.lockRefreshMs} millis` } : {}),
  ...(timings.lockExpirationMs !== undefined ? { shardLockExpiration: `${timings.lockExpirationMs} millis` } : {}),
  ...(timings.pollMs !== undefined
    ? {
        entityMessagePollInterval: `${timings.pollMs} millis`,
        entityReplyPollInterval: `${timings.pollMs} millis`,
        refreshAssignmentsInterval: `${timings.pollMs} millis`,
        runnerHealthCheckInterval: `${timings.pollMs} millis`
      }
    : {})
})

const TABLE = "muse_cluster_sessions"

// processes that start at once on a new database race to create the cluster's tables (Postgres
// refuses concurrent CREATE TABLE IF NOT EXISTS of one table): the loser tries again
const startRetry = Schedule.exponential("200 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(6)))

const ensureTable = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS muse_cluster_sessions (
    session text PRIMARY KEY, task text NOT NULL, repo text NOT NULL, base text NOT NULL,
    runner text, state text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`
})

/** Record where a session is and what it is doing. */
export const setState = (job: Job, runner: string | null, state: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO muse_cluster_sessions (session, task, repo, base, runner, state)
      VALUES (${job.session}, ${job.task}, ${job.repo}, ${job.base}, ${runner}, ${state})
      ON CONFLICT (session) DO UPDATE SET runner = EXCLUDED.runner, state = EXCLUDED.state, updated_at = now()`
  })

export interface RunnerOptions {
  readonly url: string
  /** The address other runners reach this one at. */
  readonly host: string
  readonly port: number
  readonly timings?: Timings | undefined
  /** Run (or take over) a session; the runner's address is `ctx.runner`. */
  readonly run: (job: Job, ctx: { readonly runner: string }) => Effect.Effect<Outcome>
}

/** A runner: joins the cluster and serves `Session` entities until its scope ends. */
export const runner = (options: RunnerOptions) => {
  const address = `${options.host}:${options.port}`
  const handlers = SessionEntity.toLayer(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return {
        Run: (envelope) =>
          Effect.gen(function* () {
            const job = envelope.payload
            const problem = jobProblem(job, envelope.address.entityId)
            if (problem !== undefined) {
              yield* Effect.logWarning(`refused a Run message: ${problem}`)
              return { status: `refused: ${problem}`, exitCode: 2 }
            }
            yield* setState(job, address, "running").pipe(Effect.orDie)
            const outcome = yield* options.run(job, { runner: address })
            yield* setState(job, address, outcome.status).pipe(Effect.orDie)
            return outcome
          }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      }
    }),
    { concurrency: 1, maxIdleTime: "1 minute" }
  )
  const cluster = NodeClusterSocket.layer({
    storage: "sql",
    shardingConfig: {
      ...shardingConfig(options.timings ?? {}),
      runnerAddress: Option.some(new RunnerAddress.RunnerAddress({ host: options.host, port: options.port }))
    }
  })
  return Layer.effectDiscard(ensureTable).pipe(
    Layer.provideMerge(handlers.pipe(Layer.provide(cluster))),
    Layer.catchAllCause((cause) => Layer.fail(cause)),
    Layer.retry(startRetry),
    Layer.provide(EventLogPg.layerClient(options.url))
  )
}

/** Send a session's `Run` message (stored in Postgres; a runner picks it up). */
export const submit = (url: string, job: Job, timings: Timings = {}) =>
  Effect.gen(function* () {
    yield* Effect.retry(ensureTable, startRetry)
    yield* setState(job, null, "submitted")
    const client = yield* SessionEntity.client
    yield* client(job.session).Run(job, { discard: true })
  }).pipe(
    Effect.provide(
      NodeClusterSocket.layer({ storage: "sql", clientOnly: true, shardingConfig: shardingConfig(timings) }).pipe(
        Layer.catchAllCause((cause) => Layer.fail(cause)),
        Layer.retry(startRetry),
        Layer.provideMerge(EventLogPg.layerClient(url))
      )
    ),
    Effect.scoped
  )

export interface Row {
  readonly session: string
  readonly task: string
  readonly repo: string
  readonly base: string
  readonly runner: string | null
  readonly state: string
  readonly updatedAt: string
}

/** The sessions submitted to the cluster, newest first (none when nothing was ever submitted). */
export const list = (url: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const exists = yield* sql<{ t: string | null }>`SELECT to_regclass(${TABLE})::text AS t`
    if (!exists[0]?.t) return [] as ReadonlyArray<Row>
    const rows = yield* sql<{
      session: string
      task: string
      repo: string
      base: string
      runner: string | null
      state: string
      updated_at: Date
    }>`SELECT session, task, repo, base, runner, state, updated_at FROM muse_cluster_sessions ORDER BY updated_at DESC`
    return rows.map(
      (r): Row => ({
        session: r.session,
        task: r.task,
        repo: r.repo,
        base: r.base,
        runner: r.runner,
        state: r.state,
        updatedAt: new Date(r.updated_at).toISOString()
      })
    )
  }).pipe(Effect.provide(EventLogPg.layerClient(url, { maxConnections: 1 })))
