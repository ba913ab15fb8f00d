/**
 * One model call over `@effect/ai`'s `LanguageModel`, recorded in the event log.
 *
 * `generate` writes `model.requested` (durable before the request is sent), streams the reply
 * (text deltas reach `onDelta` as they arrive), and writes `model.responded` with the text, tool
 * calls, finish reason and token usage — or `model.failed`. A request records only the messages
 * added since the agent's previous request (`keep` + `appended`), so the log grows linearly.
 * Replaying, the reply comes from the log and the language model is never called.
 *
 * @example
 * ```ts
 * import { Model } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const reply = Effect.flatMap(Model.Model, (m) =>
 *   m.generate({ agent: "main", system: "Be brief.", messages: [{ role: "user", content: "hi" }], tools: [] })
 * )
 * ```
 */
import { IdGenerator, LanguageModel, Prompt, type Response, type Toolkit } from "@effect/ai"
import { type Chunk, Context, Effect, Layer, Option, Schema, Stream } from "effect"
import * as Event from "./Event.js"
import * as Recorder from "./Recorder.js"
import * as Tools from "./Tools.js"

export class ModelError extends Schema.TaggedError<ModelError>("@musekit/core/ModelError")("ModelError", {
  model: Schema.String,
  message: Schema.String,
  /** The reply arrived but could not be used (unknown tool, broken structure): worth asking again. */
  malformed: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {
  /** The provider refused the request because the context is too long. */
  get overflow(): boolean {
    return isOverflow(this.message)
  }
}

/** Provider messages that mean "the prompt does not fit the context window". */
export const isOverflow = (message: string): boolean =>
  /context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|context window|too many tokens|input is too long|exceeds the context/i.test(
    message
  )

/** The raw parts a decode error of @effect/ai holds (what the provider sent, before decoding). */
const rawParts = (e: unknown): ReadonlyArray<unknown> => {
  for (let cur: any = e, i = 0; cur && i < 4; cur = cur.cause, i++) {
    const actual = cur.issue?.actual
    if (actual && typeof actual === "object") {
      if (Array.isArray(actual)) return actual
      if (Symbol.iterator in actual) return [...(actual as Iterable<unknown>)]
    }
  }
  return []
}

/**
 * A short account of why a reply could not be decoded. A call to a tool that is not among
 * `tools` is named (@effect/ai's own error is a dump of the whole response schema).
 */
export const describeMalformed = (e: unknown, tools?: ReadonlyArray<string>): string => {
  const text = errorMessage(e)
  if (tools !== undefined) {
    const call = rawParts(e).find(
      (p: any) => p?.type === "tool-call" && typeof p.name === "string" && !tools.includes(p.name)
    ) as { name: string } | undefined
    if (call) return `the reply called a tool named ${JSON.stringify(call.name)}, which does not exist`
  }
  const unknownTool = /ToolCallPart[\s\S]*?actual \\?"([^"\\]+)\\?"/.exec(text)
  if (unknownTool) return `the reply called a tool named "${unknownTool[1]}", which does not exist`
  const first = text.split("\n")[0] ?? text
  // a provider's own account (the models package words them) needs no prefix; a schema dump is cut short
  if (!/Chunk<|ParseError|Expected |MalformedOutput \{/.test(first)) return first.slice(0, 500)
  return `the reply could not be decoded: ${first.slice(0, 300)}`
}

const isMalformed = (e: unknown): boolean => {
  const tag = (e as any)?._tag
  if (tag === "ParseError" || tag === "MalformedOutput") return true
  return (
    tag === "UnknownError" && /ParseError|decode|Expected/.test(String((e as any)?.cause ?? (e as any)?.message ?? ""))
  )
}

export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
}

export const emptyUsage: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  totalTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0
}

export const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  totalTokens: a.totalTokens + b.totalTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
  reasoningTokens: a.reasoningTokens + b.reasoningTokens
})

export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly params: unknown
}

export interface Reply {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly finishReason: string
  readonly usage: Usage
}

export interface Request {
  readonly agent: string
  readonly parent?: string | null | undefined
  readonly system: string
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
  readonly tools: ReadonlyArray<Tools.Definition>
  readonly toolChoice?: "auto" | "none" | "required" | undefined
  /** How many leading messages are the same objects as in the agent's previous request (a hint; checked). */
  readonly stablePrefix?: number | undefined
}

export interface GenerateOptions {
  readonly onDelta?: ((delta: string) => Effect.Effect<void>) | undefined
}

export interface Result {
  readonly reply: Reply
  /** The `model.responded` event. */
  readonly event: Event.Envelope
}

export interface Service {
  /** The `provider/model` name recorded with each request. */
  readonly name: string
  /**
   * The model's context window in tokens, when known. The agent loop sizes what each tool result
   * shows the model to a tenth of it (`Tools.resultBudget`); unknown, results reach the model whole.
   */
  readonly contextWindow?: number | undefined
  readonly generate: (
    request: Request,
    options?: GenerateOptions
  ) => Effect.Effect<Result, ModelError | Recorder.RecorderError>
  /**
   * What the service remembers between requests (each agent's previous prompt, so a request
   * records only what is new), for checkpoints. A service without it turns checkpoints off.
   */
  readonly checkpoint?:
    | {
        readonly save: Effect.Effect<unknown>
        readonly restore: (state: unknown) => Effect.Effect<void>
      }
    | undefined
}

export class Model extends Context.Tag("@musekit/core/Model")<Model, Service>() {}

/** The assistant message for a reply, as it goes into the history. */
export const assistantMessage = (reply: Reply): Prompt.AssistantMessageEncoded => ({
  role: "assistant",
  content: [
    ...(reply.text.length > 0 ? [{ type: "text" as const, text: reply.text }] : []),
    ...reply.toolCalls.map((c) => ({
      type: "tool-call" as const,
      id: c.id,
      name: c.name,
      params: c.params,
      providerExecuted: false
    }))
  ]
})

/** A cheap, stable 53-bit string hash (hex), for fingerprints of prompts. */
export const hash53 = (s: string): string => hash53Of(s, "", "")

/** `hash53` of `a + b + c`, without building it. */
const hash53Of = (a: string, b: string, c: string): string => {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < a.length; i++) {
    const ch = a.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  for (let i = 0; i < b.length; i++) {
    const ch = b.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  for (let i = 0; i < c.length; i++) {
    const ch = c.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0")
}

/**
 * The recorded fingerprint of a prompt: a hash chained over the canonical JSON of its messages as
 * the log stores it (redacted), `h(i) = hash53(h(i-1) + "\n" + json(i))` with `h(-1) = ""`; an
 * empty prompt hashes `""`.
 */
export const promptHash = (messageJson: ReadonlyArray<string>): string => {
  let h = ""
  for (const j of messageJson) h = hash53(`${h}\n${j}`)
  return messageJson.length === 0 ? hash53("") : h
}

const toUsage = (u: Response.Usage | undefined): Usage => ({
  inputTokens: u?.inputTokens ?? 0,
  outputTokens: u?.outputTokens ?? 0,
  totalTokens: u?.totalTokens ?? (u?.inputTokens ?? 0) + (u?.outputTokens ?? 0),
  cachedInputTokens: u?.cachedInputTokens ?? 0,
  reasoningTokens: u?.reasoningTokens ?? 0
})

const errorMessage = (e: unknown): string => {
  if (typeof e === "object" && e !== null && "message" in e && typeof (e as any).message === "string") {
    return (e as any).message
  }
  return String(e)
}

const ephemeral = { anthropic: { cacheControl: { type: "ephemeral" as const } } }

/** The blob a text part stands for (`Agent` keeps large input texts in the blob store), if any. */
const textBlobOf = (p: Prompt.UserMessagePartEncoded): string | undefined => {
  if (p.type !== "text") return undefined
  const blob = (p.options as { muse?: { blob?: unknown } } | undefined)?.muse?.blob
  return typeof blob === "string" ? blob : undefined
}

/** The part with its text read back from the blob store, without the reference. */
const withText = (p: Prompt.TextPartEncoded, text: string): Prompt.TextPartEncoded => {
  const { blob: _blob, bytes: _bytes, ...muse } = (p.options as { muse: Record<string, unknown> }).muse
  const options = { ...p.options, muse } as Record<string, unknown>
  if (Object.keys(muse).length === 0) delete options.muse
  return { ...p, text, options: options as Prompt.TextPartEncoded["options"] }
}

/** Resolve `blob:<sha256>` file data to bytes, text parts kept in the blob store to their text, and add prompt-cache breakpoints. */
const toProviderPrompt = (
  system: string,
  messages: ReadonlyArray<Prompt.MessageEncoded>,
  getBlob: (hash: string) => Effect.Effect<Uint8Array, unknown>,
  cache: {
    readonly system: (system: string) => Prompt.Message
    readonly decoded: WeakMap<object, Prompt.Message>
    readonly messageOf: (m: Prompt.MessageEncoded) => Prompt.Message
  }
): Effect.Effect<Prompt.Prompt> =>
  Effect.gen(function* () {
    const { decoded, messageOf } = cache
    const out: Array<Prompt.Message> = [cache.system(system)]
    for (const m of messages) {
      // a message decoded before has no blob to read (those are decoded anew each time)
      const known = decoded.get(m)
      if (known !== undefined) {
        out.push(known)
        continue
      }
      const hasBlob =
        m.role === "user" &&
        Array.isArray(m.content) &&
        m.content.some(
          (p) =>
            (p.type === "file" && typeof p.data === "string" && p.data.startsWith("blob:")) ||
            textBlobOf(p) !== undefined
        )
      if (!hasBlob) {
        out.push(messageOf(m))
        continue
      }
      if (m.role === "user" && Array.isArray(m.content)) {
        const content: Array<Prompt.UserMessagePartEncoded> = []
        for (const p of m.content) {
          const textBlob = textBlobOf(p)
          if (p.type === "file" && typeof p.data === "string" && p.data.startsWith("blob:")) {
            const bytes = yield* Effect.orDie(getBlob(p.data.slice(5)))
            content.push({ ...p, data: bytes })
          } else if (textBlob !== undefined) {
            const bytes = yield* Effect.orDie(getBlob(textBlob))
            content.push(withText(p as Prompt.TextPartEncoded, new TextDecoder().decode(bytes)))
          } else content.push(p)
        }
        out.push(Schema.decodeSync(Prompt.Message)({ ...m, content }))
      }
    }
    // A breakpoint on the newest message lets the provider cache the whole stable prefix.
    const last = out[out.length - 1]!
    if (out.length > 1 && last.role !== "assistant") {
      out[out.length - 1] = Prompt.makeMessage(last.role as any, {
        content: last.content as any,
        options: ephemeral
      }) as any
    }
    return Prompt.fromMessages(out)
  })

export interface MakeOptions {
  /** The model's context window in tokens (see `Service.contextWindow`). */
  readonly contextWindow?: number | undefined
}

/** Build the service over a `LanguageModel`; recording goes through `Recorder`. */
export const make = (
  name: string,
  options: MakeOptions = {}
): Effect.Effect<Service, never, LanguageModel.LanguageModel | Recorder.Recorder> =>
  Effect.gen(function* () {
    const lm = yield* LanguageModel.LanguageModel
    const rec = yield* Recorder.Recorder
    // The id generator a `LanguageModel` made in this context uses (the default when none is given). With it in
    // the caller's context, a model's stream need not provide it again to every effect it runs.
    const ids = Option.getOrElse(
      yield* Effect.serviceOption(IdGenerator.IdGenerator),
      () => IdGenerator.defaultIdGenerator
    )
    // Per agent: a hash of each message of its previous request (to record only what is new) and a
    // running hash over them (so a request's fingerprint costs only its new messages). Both are taken
    // over the messages' JSON as the log stores it, redacted: a replay sees only that, and computes
    // the same (and a checkpoint of this state holds no secret).
    // (`hashes` are taken only when needed: for a checkpoint, or restored from one, where `jsons` is gone)
    const previous = new Map<
      string,
      {
        jsons: Array<string | undefined>
        hashes: Array<string | undefined>
        chain: Array<string>
        objects: Array<Prompt.MessageEncoded | undefined>
      }
    >()
    const jsonCache = new WeakMap<object, string>()
    // system prompts are few and long (instructions, AGENTS.md), and sent with every request
    const systemHashes = new Map<string, string>()
    const systemHash = (system: string) => {
      let h = systemHashes.get(system)
      if (h === undefined) {
        h = hash53(rec.redact(system))
        if (systemHashes.size > 64) systemHashes.clear()
        systemHashes.set(system, h)
      }
      return h
    }
    const fingerprintOf = (m: Prompt.MessageEncoded) => {
      let f = jsonCache.get(m)
      if (f === undefined) {
        f = rec.redact(Event.canonicalJson(m))
        jsonCache.set(m, f)
      }
      return f
    }
    const decoded = new WeakMap<object, Prompt.Message>()
    const decodeMessage = Schema.decodeSync(Prompt.Message)
    const messageOf = (m: Prompt.MessageEncoded) => {
      let d = decoded.get(m)
      if (d === undefined) {
        d = decodeMessage(m)
        decoded.set(m, d)
      }
      return d
    }
    // the system message, decoded once per system prompt (not once per request: the same decoded
    // object each time also lets the provider's codec encode it once)
    const systemMessages = new Map<string, Prompt.Message>()
    const systemMessage = (system: string) => {
      let m = systemMessages.get(system)
      if (m === undefined) {
        m = decodeMessage({ role: "system", content: system, options: ephemeral })
        if (systemMessages.size > 64) systemMessages.clear()
        systemMessages.set(system, m)
      }
      return m
    }
    const promptCache = { system: systemMessage, decoded, messageOf }
    const toolkits = new Map<string, Toolkit.WithHandler<any>>()
    const toolkitFor = (defs: ReadonlyArray<Tools.Definition>) => {
      const key = defs.map((d) => d.name).join(",")
      let tk = toolkits.get(key)
      if (!tk) {
        tk = {
          tools: Object.fromEntries(defs.map((d) => [d.name, Tools.toAiTool(d)])),
          handle: (() => Effect.dieMessage("tools are run by the agent loop")) as any
        }
        toolkits.set(key, tk)
      }
      return tk
    }

    type Outcome = Reply | { readonly error: string; readonly malformed: boolean }
    const call = (request: Request, options: GenerateOptions): Effect.Effect<Outcome> =>
      Effect.gen(function* () {
        const prompt = yield* toProviderPrompt(request.system, request.messages, rec.getBlob, promptCache)
        let text = ""
        const toolCalls: Array<ToolCall> = []
        let finishReason = "unknown"
        let usage = emptyUsage
        const stream = lm.streamText({
          prompt,
          toolkit: toolkitFor(request.tools),
          toolChoice: request.toolChoice ?? "auto",
          disableToolCallResolution: true
        }) as Stream.Stream<Response.StreamPart<any>, unknown>
        const onDelta = options.onDelta
        // a chunk of parts at a time: one runtime step per chunk, not one per part
        yield* Stream.runForEachChunk(stream, (parts: Chunk.Chunk<Response.StreamPart<any>>) => {
          let deltas: Array<Effect.Effect<void>> | undefined
          for (const part of parts) {
            switch (part.type) {
              case "text-delta":
                text += part.delta
                if (onDelta) (deltas ??= []).push(onDelta(part.delta))
                break
              case "tool-call":
                toolCalls.push({ id: part.id, name: part.name, params: part.params })
                break
              case "finish":
                finishReason = part.reason
                usage = toUsage(part.usage)
                break
              case "error": {
                const failed = Effect.fail(new ModelError({ model: name, message: errorMessage(part.error) }))
                return deltas === undefined ? failed : Effect.zipRight(Effect.all(deltas, { discard: true }), failed)
              }
            }
          }
          return deltas === undefined
            ? Effect.void
            : deltas.length === 1
              ? deltas[0]!
              : Effect.all(deltas, { discard: true })
        })
        return { text, toolCalls, finishReason, usage } satisfies Reply
      }).pipe(
        Effect.scoped,
        Effect.provideService(IdGenerator.IdGenerator, ids),
        Effect.catchAll((e) =>
          Effect.succeed(
            e instanceof ModelError
              ? { error: e.message, malformed: false }
              : isMalformed(e)
                ? {
                    error: describeMalformed(
                      e,
                      request.tools.map((t) => t.name)
                    ),
                    malformed: true
                  }
                : { error: errorMessage(e), malformed: false }
          )
        )
      )

    const generate = (
      request: Request,
      options: GenerateOptions = {}
    ): Effect.Effect<Result, ModelError | Recorder.RecorderError> =>
      Effect.gen(function* () {
        let state = previous.get(request.agent)
        if (!state) previous.set(request.agent, (state = { jsons: [], hashes: [], chain: [], objects: [] }))
        const st = state
        const n = request.messages.length
        const messages = request.messages
        let keep = Math.min(request.stablePrefix ?? 0, st.chain.length, n)
        const start = keep
        // the same object as last time is the same message; otherwise compare its JSON (or, restored
        // from a checkpoint, the hash of it)
        const same = (k: number) => {
          const m = messages[k]!
          if (m === st.objects[k]) return true
          const before = st.jsons[k]
          return before !== undefined ? before === fingerprintOf(m) : st.hashes[k] === hash53(fingerprintOf(m))
        }
        while (keep < st.chain.length && keep < n && same(keep)) keep++
        st.jsons.length = keep
        st.hashes.length = keep
        st.chain.length = keep
        st.objects.length = Math.min(st.objects.length, keep)
        // (before `start` the agent promised the very same objects as last time)
        for (let i = start; i < keep; i++) st.objects[i] = messages[i]
        for (let i = keep; i < n; i++) {
          const json = fingerprintOf(messages[i]!)
          st.jsons.push(json)
          st.hashes.push(undefined)
          st.objects.push(messages[i])
          st.chain.push(hash53Of(i === 0 ? "" : st.chain[i - 1]!, "\n", json))
        }
        const { value, outcome } = yield* Recorder.stepWith<Outcome, never, never>(rec, {
          agent: request.agent,
          parent: request.parent,
          intent: {
            type: "model.requested",
            data: {
              model: name,
              system: systemHash(request.system),
              tools: request.tools.map((t) => t.name),
              messages: n,
              keep,
              appended: request.messages.slice(keep),
              hash: n === 0 ? hash53("") : state.chain[n - 1]
            }
          },
          run: () => call(request, options),
          outcome: (r) =>
            "error" in r
              ? { type: "model.failed", data: { model: name, error: r.error, malformed: r.malformed } }
              : { type: "model.responded", data: { model: name, ...r } },
          outcomeTypes: ["model.responded", "model.failed"],
          fromOutcome: (e): Outcome => {
            const d = e.data as any
            return e.type === "model.failed"
              ? { error: String(d.error), malformed: d.malformed === true }
              : { text: d.text, toolCalls: d.toolCalls, finishReason: d.finishReason, usage: d.usage }
          }
        })
        if ("error" in value) {
          return yield* new ModelError({ model: name, message: value.error, malformed: value.malformed })
        }
        return { reply: value, event: outcome }
      })

    const checkpoint: Service["checkpoint"] = {
      save: Effect.sync(() =>
        Object.fromEntries(
          [...previous].map(([agent, st]) => [
            agent,
            { hashes: st.chain.map((_, k) => st.hashes[k] ?? hash53(st.jsons[k] ?? "")), chain: [...st.chain] }
          ])
        )
      ),
      restore: (state) =>
        Effect.sync(() => {
          previous.clear()
          for (const [agent, st] of Object.entries(
            state as Record<string, { hashes: Array<string>; chain: Array<string> }>
          ))
            previous.set(agent, { jsons: [], hashes: [...st.hashes], chain: [...st.chain], objects: [] })
        })
    }

    return {
      name,
      generate,
      checkpoint,
      ...(options.contextWindow !== undefined ? { contextWindow: options.contextWindow } : {})
    } satisfies Service
  })

/** The recorded model over a `LanguageModel` layer in context. */
export const layer = (
  name: string,
  options: MakeOptions = {}
): Layer.Layer<Model, never, LanguageModel.LanguageModel | Recorder.Recorder> =>
  Layer.effect(Model, make(name, options))

/** A `LanguageModel` that fails the program if it is ever called (replay must not call a model). */
export const layerLanguageModelForbidden: Layer.Layer<LanguageModel.LanguageModel> = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: () => Effect.dieMessage("a model was called during replay"),
    streamText: () => Stream.dieMessage("a model was called during replay")
  })
)

/** The recorded usage of a `model.responded` event, if it is one. */
export const usageOf = (e: Event.Envelope): Option.Option<Usage> =>
  e.type === "model.responded" && typeof e.data === "object" && e.data !== null
    ? Option.some((e.data as { usage: Usage }).usage)
    : Option.none()
