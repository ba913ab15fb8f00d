/**
 * A session's events as OpenTelemetry spans and metrics, sent with `@effect/opentelemetry`'s own
 * OTLP/HTTP exporters (protobuf or JSON; no OpenTelemetry SDK is loaded). Loaded only when
 * telemetry is on (`telemetry.ts`).
 *
 * The spans are made from the log, with the times the log recorded:
 *
 * ```
 * muse.session                      one run of the session (a resume is a run of its own)
 * └ muse.turn                       a turn of the main agent (user.message → turn.completed)
 *   ├ chat <model>                  a model call: model, tokens in/out/cached, cost, finish reason
 *   ├ execute_tool <tool>           a tool call: tool, effect, exit code, bytes; muse.merge for a merge
 *   │ └ invoke_agent <member>       the crew task a delegation started
 *   │   └ muse.turn → chat / execute_tool …
 *   └ muse.approval                 a wait for a person's answer
 * ```
 *
 * A run that resumes a session is shown the events it replays as well: they build the state (what
 * was in flight) but end no span, so nothing recorded before is sent twice. A span ends only with
 * an outcome this run recorded; one still open when the run stops is not sent (its outcome, after a
 * resume, sends it then). Metrics: `muse.tokens`, `muse.cost`, `muse.model.duration`,
 * `muse.tool.duration`.
 *
 * @example
 * ```ts
 * const handle = yield* TelemetrySpans.start(settings, { session, model, command: "run" })
 * const io = handle.wrap(baseIo)
 * ```
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type { Event } from "@musekit/core"
import { Context, Effect, Exit, Layer, Metric, MetricBoundaries, Option, type Scope, type Tracer } from "effect"
import * as ModelInfo from "./modelInfo.js"
import type { Handle, RunInfo, Settings } from "./telemetry.js"
import { version } from "./version.js"

const ns = (ms: number): bigint => BigInt(Math.round(ms)) * 1_000_000n

const obj = (u: unknown): Record<string, any> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? (u as Record<string, any>) : {}

const tokens = Metric.counter("muse.tokens", {
  description: "tokens the session's model calls used",
  incremental: true
})
const cost = Metric.counter("muse.cost", {
  description: "what the session's model calls cost, in US dollars",
  incremental: true
})
const boundaries = MetricBoundaries.exponential({ start: 1, factor: 2, count: 22 })
const modelDuration = Metric.histogram("muse.model.duration", boundaries, "model call durations in milliseconds")
const toolDuration = Metric.histogram("muse.tool.duration", boundaries, "tool call durations in milliseconds")

const record = <In>(metric: Metric.Metric<any, In, any>, value: In, tags: Record<string, string>) => {
  let m = metric
  for (const [k, v] of Object.entries(tags)) m = Metric.tagged(m, k, v)
  Effect.runSync(Metric.update(m, value))
}

interface Open {
  readonly span: Tracer.Span
  readonly at: number
}

/** The spans of one run, from the events it is shown. */
export class Spans {
  private readonly open = new Map<string, Open>()
  /** Tool spans by `<agent>:<callId>`, kept for the crew tasks a delegation starts. */
  private readonly calls = new Map<string, Tracer.Span>()
  /** The kind of the task each member is on (a review ends with `crew.review.done`, a message with the turn). */
  private readonly taskKind = new Map<string, string>()
  /** Events before this seq were recorded by an earlier run: they end no span. */
  fromSeq = 0

  constructor(
    private readonly tracer: Tracer.Tracer,
    readonly session: Tracer.Span,
    private readonly info: RunInfo
  ) {}

  private begin(
    key: string,
    name: string,
    parent: Tracer.Span,
    at: number,
    attrs: Record<string, unknown>,
    kind: Tracer.SpanKind = "internal"
  ) {
    const span = this.tracer.span(name, Option.some(parent), Context.empty(), [], ns(at), kind)
    span.attribute("muse.session.id", this.info.session)
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) span.attribute(k, v)
    this.open.set(key, { span, at })
    return span
  }

  /** End the span open under `key` if this run recorded the outcome; forget it either way. */
  private finish(key: string, e: Event.Envelope, attrs: Record<string, unknown>, failure?: string) {
    const o = this.open.get(key)
    if (!o) return undefined
    this.open.delete(key)
    if (e.seq < this.fromSeq) return undefined
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) o.span.attribute(k, v)
    o.span.end(ns(Math.max(e.at, o.at)), failure === undefined ? Exit.void : Exit.fail(failure))
    return o
  }

  /** The span an agent's work nests in: its turn, else its crew task, else the session. */
  private within(agent: string): Tracer.Span {
    return this.open.get(`${agent} turn`)?.span ?? this.open.get(`${agent} task`)?.span ?? this.session
  }

  add(e: Event.Envelope): void {
    const d = obj(e.data)
    const a = e.agent
    const live = e.seq >= this.fromSeq
    switch (e.type) {
      case "user.message":
      case "turn.resumed": {
        this.open.delete(`${a} turn`)
        this.begin(`${a} turn`, "muse.turn", this.open.get(`${a} task`)?.span ?? this.session, e.at, {
          "muse.agent": a,
          "muse.turn.resumed": e.type === "turn.resumed" ? true : undefined
        })
        return
      }
      case "turn.completed":
      case "turn.interrupted": {
        const u = obj(d.usage)
        const status = e.type === "turn.interrupted" ? "interrupted" : String(d.status ?? "completed")
        this.finish(
          `${a} turn`,
          e,
          {
            "muse.turn.status": status,
            "muse.turn.steps": typeof d.steps === "number" ? d.steps : undefined,
            "muse.turn.tool_calls": typeof d.toolCalls === "number" ? d.toolCalls : undefined,
            "gen_ai.usage.input_tokens": u.inputTokens,
            "gen_ai.usage.output_tokens": u.outputTokens
          },
          status === "failed" ? String(d.reason ?? "the turn failed") : undefined
        )
        // a message to a member is done when the turn it started is
        if (this.taskKind.get(a) === "message") {
          this.taskKind.delete(a)
          this.finish(`${a} task`, e, { "muse.task.status": status })
        }
        return
      }
      case "model.requested": {
        const model = String(d.model ?? "")
        this.begin(
          `${a} model`,
          `chat ${model}`,
          this.within(a),
          e.at,
          {
            "muse.agent": a,
            "gen_ai.operation.name": "chat",
            "gen_ai.system": model.split("/")[0],
            "gen_ai.request.model": model,
            "muse.prompt.messages": typeof d.messages === "number" ? d.messages : undefined
          },
          "client"
        )
        return
      }
      case "model.responded": {
        const u = obj(d.usage)
        const model = String(d.model ?? "")
        const usd = ModelInfo.cost(model, u)
        const o = this.finish(`${a} model`, e, {
          "gen_ai.response.model": model,
          "gen_ai.usage.input_tokens": u.inputTokens ?? 0,
          "gen_ai.usage.output_tokens": u.outputTokens ?? 0,
          "gen_ai.usage.cache_read.input_tokens": u.cachedInputTokens ?? 0,
          "gen_ai.response.finish_reasons": d.finishReason ? [String(d.finishReason)] : undefined,
          "muse.cost.usd": usd,
          "muse.tool_calls": Array.isArray(d.toolCalls) ? d.toolCalls.length : 0
        })
        if (!live) return
        const tags = { agent: a, model }
        record(tokens, Number(u.inputTokens ?? 0), { ...tags, kind: "input" })
        record(tokens, Number(u.outputTokens ?? 0), { ...tags, kind: "output" })
        record(tokens, Number(u.cachedInputTokens ?? 0), { ...tags, kind: "cached_input" })
        if (usd !== undefined) record(cost, usd, tags)
        if (o) record(modelDuration, Math.max(0, e.at - o.at), tags)
        return
      }
      case "model.failed":
        this.finish(`${a} model`, e, {}, String(d.error ?? "the model call failed"))
        return
      case "approval.requested":
        this.begin(`${a} approval ${d.callId ?? ""}`, "muse.approval", this.within(a), e.at, {
          "muse.agent": a,
          "gen_ai.tool.name": d.tool,
          "gen_ai.tool.call.id": d.callId
        })
        return
      case "approval.answered":
        this.finish(`${a} approval ${d.callId ?? ""}`, e, {
          "muse.approval.allow": d.allow === true,
          "muse.approval.scope": d.scope
        })
        return
      case "tool.started": {
        const tool = String(d.tool ?? "")
        const call = String(d.callId ?? e.seq)
        const merge = tool === "worktree_merge"
        const p = obj(d.params)
        const span = this.begin(
          `${a} tool ${call}`,
          merge ? "muse.merge" : `execute_tool ${tool}`,
          this.within(a),
          e.at,
          {
            "muse.agent": a,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call,
            "muse.tool.effect": d.effect,
            "muse.merge.agent": merge ? p.agent : undefined
          }
        )
        if (tool === "delegate" || tool === "message") this.calls.set(`${a}:${call}`, span)
        return
      }
      case "tool.completed":
      case "tool.rejected": {
        const call = String(d.callId ?? "")
        const r = obj(d.result)
        const bytes = typeof d.bytes === "number" ? d.bytes : Buffer.byteLength(JSON.stringify(d.result ?? null) ?? "")
        const failed = e.type === "tool.rejected" || d.isFailure === true
        const o = this.finish(
          `${a} tool ${call}`,
          e,
          {
            "muse.tool.exit_code": typeof r.exit_code === "number" ? r.exit_code : undefined,
            "muse.tool.bytes": bytes,
            "muse.tool.settled": d.settled,
            "muse.merge.commit": typeof r.commit === "string" ? r.commit : undefined
          },
          failed
            ? String(e.type === "tool.rejected" ? (d.reason ?? "rejected") : (r.error ?? "the tool failed"))
            : undefined
        )
        if (live && o) {
          record(toolDuration, Math.max(0, e.at - o.at), {
            agent: a,
            tool: String(d.tool ?? ""),
            outcome: failed ? "failed" : "ok"
          })
        }
        return
      }
      case "crew.task.received": {
        if (d.kind === "stop" || d.kind === "fail") return
        const id = String(d.id ?? "")
        const parent = this.calls.get(id) ?? this.open.get(`${String(d.from ?? "")} task`)?.span ?? this.session
        this.calls.delete(id)
        this.taskKind.set(a, String(d.kind ?? "task"))
        this.begin(`${a} task`, `invoke_agent ${a}`, parent, e.at, {
          "muse.agent": a,
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.agent.name": a,
          "muse.task.id": id,
          "muse.task.kind": d.kind,
          "muse.task.from": d.from
        })
        return
      }
      case "crew.task.done": {
        const review = obj(d.review)
        this.finish(
          `${a} task`,
          e,
          { "muse.task.status": d.status, "muse.review.verdict": review.verdict },
          d.status === "completed" ? undefined : String(d.text ?? d.status ?? "the task failed")
        )
        return
      }
      case "crew.review.done":
        this.taskKind.delete(a)
        this.finish(`${a} task`, e, { "muse.task.status": "completed" })
        return
      case "crew.member.failed":
        this.finish(`${a} task`, e, {}, String(d.error ?? "the member failed"))
        return
      case "context.compacted":
        if (live) {
          this.within(a).event("muse.context.compacted", ns(e.at), {
            "muse.agent": a,
            "muse.context.before": d.before,
            "muse.context.after": d.after
          })
        }
        return
    }
  }
}

const layerFor = (settings: Settings) =>
  Layer.merge(
    settings.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf,
    FetchHttpClient.layer
  )

export const start = (settings: Settings, info: RunInfo): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.gen(function* () {
    const resource = {
      serviceName: settings.serviceName,
      serviceVersion: version(),
      attributes: { "muse.session.id": info.session }
    }
    const context = yield* Layer.build(layerFor(settings))
    const tracer = yield* OtlpTracer.make({
      url: settings.tracesUrl,
      resource,
      headers: settings.headers,
      exportInterval: `${settings.exportIntervalMs} millis`,
      shutdownTimeout: "5 seconds"
    }).pipe(Effect.provide(context))
    yield* OtlpMetrics.make({
      url: settings.metricsUrl,
      resource,
      headers: settings.headers,
      exportInterval: `${Math.max(settings.exportIntervalMs, 1000)} millis`,
      shutdownTimeout: "5 seconds"
    }).pipe(Effect.provide(context))
    const session = tracer.span("muse.session", Option.none(), Context.empty(), [], ns(Date.now()), "internal")
    session.attribute("muse.session.id", info.session)
    session.attribute("muse.command", info.command)
    session.attribute("gen_ai.request.model", info.model)
    const spans = new Spans(tracer, session, info)
    // a resume is shown the events it replays before it says where it goes on from: until then, none is its own
    if (info.resuming) spans.fromSeq = Number.POSITIVE_INFINITY
    // (finalizers run last-added first: the session's span ends before the exporters send what is left)
    yield* Effect.addFinalizer(() => Effect.sync(() => session.end(ns(Date.now()), Exit.void)))
    return {
      wrap: (io) => ({
        ...io,
        onResume: (r: Parameters<NonNullable<typeof io.onResume>>[0]) => {
          spans.fromSeq = r.nextSeq
          session.attribute("muse.session.resumed", true)
          session.attribute("muse.session.from_seq", r.nextSeq)
          return io.onResume ? io.onResume(r) : Effect.void
        },
        onEvent: (e: Event.Envelope) =>
          Effect.zipRight(
            Effect.sync(() => spans.add(e)),
            io.onEvent ? io.onEvent(e) : Effect.void
          )
      })
    } satisfies Handle
  })
