/**
 * OpenTelemetry for sessions, off unless asked for: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) in the environment, or `telemetry.endpoint` in the user's
 * config file. A repository's own config cannot turn it on: it must not send the prompts and
 * commands of the sessions run in it to a collector of its choosing. When it is off nothing of it
 * is loaded; when it is on, `telemetrySpans.ts` (loaded then) turns the session's events into spans
 * and metrics and sends them over OTLP/HTTP.
 *
 * @example
 * ```ts
 * const telemetry = yield* Telemetry.start(Telemetry.settings(prepared.loaded, env), { session, model })
 * const io = telemetry.wrap(baseIo) // spans from the events this run records, none from those it replays
 * ```
 */
import type { SessionRuntime } from "@musekit/node"
import { Effect, type Scope } from "effect"
import type * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"

export interface Settings {
  /** Where spans go (a full URL, `…/v1/traces`). */
  readonly tracesUrl: string
  /** Where metrics go (`…/v1/metrics`). */
  readonly metricsUrl: string
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: "http/protobuf" | "http/json"
  readonly serviceName: string
  /** What turned it on, for messages. */
  readonly source: string
  /** How often spans and metrics are sent (ms). */
  readonly exportIntervalMs: number
}

/** `k1=v1,k2=v2` (values URL-encoded), as OTEL_EXPORTER_OTLP_HEADERS is written. */
export const parseHeaders = (text: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const pair of (text ?? "").split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    try {
      out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim())
    } catch {
      out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim()
    }
  }
  return out
}

const withPath = (base: string, signal: "traces" | "metrics") => `${base.replace(/\/+$/, "")}/v1/${signal}`

/**
 * The telemetry settings of this run, or `undefined` when it is off (the default). The environment
 * beats the user's config file. Fails with a usage error for a setting muse cannot honour.
 */
export const settings = (
  loaded: Pick<Config.Loaded, "user" | "userFile">,
  env: NodeJS.ProcessEnv
): Effect.Effect<Settings | undefined, CliError> =>
  Effect.suspend(() => {
    if ((env.OTEL_SDK_DISABLED ?? "").toLowerCase() === "true") return Effect.succeed(undefined)
    const file = loaded.user?.telemetry
    const base = env.OTEL_EXPORTER_OTLP_ENDPOINT || file?.endpoint
    const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (base ? withPath(base, "traces") : undefined)
    if (!traces) return Effect.succeed(undefined)
    const source =
      env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? "the environment" : loaded.userFile
    const metrics =
      env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ||
      (base ? withPath(base, "metrics") : withPath(traces.replace(/\/v1\/traces\/?$/, ""), "metrics"))
    const protocol = (
      env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ||
      env.OTEL_EXPORTER_OTLP_PROTOCOL ||
      file?.protocol ||
      "http/protobuf"
    ).trim()
    for (const url of [traces, metrics]) {
      if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) {
        return Effect.fail(
          new CliError({
            code: ExitCode.Usage,
            message: `telemetry (${source}): ${JSON.stringify(url)} is not an http(s) URL; set OTEL_EXPORTER_OTLP_ENDPOINT to e.g. http://127.0.0.1:4318`
          })
        )
      }
    }
    if (protocol !== "http/protobuf" && protocol !== "http/json") {
      return Effect.fail(
        new CliError({
          code: ExitCode.Usage,
          message: `telemetry (${source}): protocol ${JSON.stringify(protocol)} is not supported; muse sends OTLP over HTTP: use http/protobuf (the default) or http/json (for gRPC, put a collector in between)`
        })
      )
    }
    const interval = Number(env.OTEL_BSP_SCHEDULE_DELAY ?? 5000)
    return Effect.succeed({
      tracesUrl: traces,
      metricsUrl: metrics,
      headers: { ...(file?.headers ?? {}), ...parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS) },
      protocol,
      serviceName: env.OTEL_SERVICE_NAME || file?.serviceName || "muse",
      source,
      exportIntervalMs: Number.isFinite(interval) && interval > 0 ? interval : 5000
    } satisfies Settings)
  })

export interface RunInfo {
  readonly session: string
  readonly model: string
  /** The command that runs the session (`run`, `resume`, the interactive UI, `acp`). */
  readonly command: string
  /** The run goes on from a log that holds events already (it is told from where by `onResume`). */
  readonly resuming: boolean
}

export interface Handle {
  /** The run's io, with its events observed: spans for those this run records, none for those it replays. */
  readonly wrap: <I extends Pick<SessionRuntime.Io, "onEvent" | "onResume">>(io: I) => I
}

const off: Handle = { wrap: (io) => io }

/**
 * Start telemetry for one run of a session (for as long as the scope lasts: closing it ends the
 * session's span and sends what is left). Without settings, it does nothing and loads nothing.
 */
export const start = (settings: Settings | undefined, info: RunInfo): Effect.Effect<Handle, never, Scope.Scope> =>
  settings === undefined
    ? Effect.succeed(off)
    : Effect.flatMap(
        Effect.promise(() => import("./telemetrySpans.js")),
        (m) => m.start(settings, info)
      )
