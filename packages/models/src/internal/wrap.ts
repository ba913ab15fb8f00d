import { AiError, LanguageModel, Response } from "@effect/ai"
import { Chunk, Effect, Stream } from "effect"
import { notAStreamPrefix } from "../HttpPolicy.js"
import type { Api } from "../Provider.js"
import { clarify, type ErrorContext, incompleteStream, ProviderError, ProviderMalformedOutput } from "./errors.js"

const num = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)

/**
 * One meaning for every provider:
 * - `inputTokens`: every prompt token, cache reads (and Anthropic cache writes) included;
 * - `cachedInputTokens`: the part of `inputTokens` read from the prompt cache;
 * - `outputTokens`: every generated token, reasoning included;
 * - `reasoningTokens`: the part of `outputTokens` spent on reasoning (0 when not reported);
 * - `totalTokens`: input + output.
 */
export const normalizeUsage = (api: Api, usage: Response.Usage, metadata: unknown): Response.Usage => {
  let input = num(usage.inputTokens) ?? 0
  let output = num(usage.outputTokens) ?? 0
  const cached = num(usage.cachedInputTokens) ?? 0
  const reasoning = num(usage.reasoningTokens) ?? 0
  if (api === "anthropic") {
    // Anthropic's input_tokens counts only the uncached tail of the prompt.
    const raw = (metadata as { anthropic?: { usage?: Record<string, unknown> } } | undefined)?.anthropic?.usage
    input += (num(raw?.cache_read_input_tokens) ?? 0) + (num(raw?.cache_creation_input_tokens) ?? 0)
  }
  if (api === "google") {
    // Gemini's candidatesTokenCount leaves out the thinking tokens.
    output += reasoning
  }
  if (input < cached) input = cached
  return new Response.Usage({
    inputTokens: input,
    outputTokens: output,
    totalTokens: input + output,
    cachedInputTokens: cached,
    reasoningTokens: reasoning
  })
}

const fixPart = <P>(api: Api, part: P): P => {
  const p = part as { type?: string; usage?: Response.Usage; metadata?: unknown }
  if (p.type !== "finish" || p.usage === undefined) return part
  return { ...p, usage: normalizeUsage(api, p.usage, p.metadata) } as P
}

/** The names of the tools a call offers (`undefined` when they cannot be known before it runs). */
const toolNames = (options: any): ReadonlyArray<string> | undefined => {
  const toolkit = options?.toolkit
  if (toolkit === undefined) return []
  const tools = (toolkit as { tools?: unknown }).tools
  if (typeof tools !== "object" || tools === null) return undefined
  return Object.values(tools as Record<string, { name: string }>).map((t) => t.name)
}

/**
 * A reply that calls a tool the call did not offer fails @effect/ai's decoding with a dump of the
 * whole response schema; the raw parts are in the decode error. This says which tool was called and
 * which ones there are.
 */
const unknownToolError = (ctx: ErrorContext, method: string, options: any, e: unknown): unknown => {
  if (!AiError.isAiError(e) || e._tag !== "MalformedOutput") return undefined
  const actual = (e.cause as { issue?: { actual?: unknown } } | undefined)?.issue?.actual
  const parts: ReadonlyArray<unknown> = Chunk.isChunk(actual)
    ? Chunk.toArray(actual)
    : Array.isArray(actual)
      ? actual
      : []
  const known = toolNames(options)
  if (known === undefined) return undefined
  const call = parts.find(
    (p): p is { type: "tool-call"; name: string } =>
      typeof p === "object" &&
      p !== null &&
      (p as { type?: unknown }).type === "tool-call" &&
      typeof (p as { name?: unknown }).name === "string" &&
      !known.includes((p as { name: string }).name)
  )
  if (call === undefined) return undefined
  return new ProviderMalformedOutput(
    {
      module: "Models",
      method,
      cause: e.cause,
      description: `${ctx.provider}/${ctx.model} called a tool that does not exist: ${JSON.stringify(call.name)}. The tools it has: ${
        known.length > 0 ? known.join(", ") : "none"
      }.`
    },
    { disableValidation: true }
  )
}

/** Stands for the cut-short error of a stream not cut short (no error is this object). */
const noCut = {}

/** Whether a stream failed because the connection was lost or closed early (worth asking once more). */
const isCut = (e: unknown, cutShort: unknown): boolean =>
  e === cutShort ||
  (AiError.isAiError(e) &&
    e._tag === "HttpResponseError" &&
    e.reason === "Decode" &&
    e.response.status < 300 &&
    !(e.description ?? "").startsWith(notAStreamPrefix))

/**
 * Wraps a provider's `LanguageModel` so that its usage has one meaning for all providers, its
 * errors say what happened in one sentence, and a stream that ends without a finish part fails
 * instead of ending quietly.
 *
 * A stream cut mid-way (connection lost, or closed before the provider said it was complete) is
 * asked for once more. Its parts go on where the cut one stopped: the text already passed on is
 * not passed on again (the retry must repeat it; if it says something else, the call fails, as the
 * text already shown cannot be taken back), and no retry is made once a tool call was passed on.
 */
export const wrap = (api: Api, ctx: ErrorContext, inner: LanguageModel.Service): LanguageModel.Service => {
  const mapError = (e: unknown) => clarify(ctx, e)
  const generateText = (options: any) =>
    inner.generateText(options).pipe(
      Effect.map((response) => new LanguageModel.GenerateTextResponse(response.content.map((p) => fixPart(api, p)))),
      Effect.mapError((e) => unknownToolError(ctx, "generateText", options, e) ?? mapError(e))
    )
  const generateObject = (options: any) =>
    inner.generateObject(options).pipe(
      Effect.map(
        (response) =>
          new LanguageModel.GenerateObjectResponse(
            response.value,
            response.content.map((p) => fixPart(api, p))
          )
      ),
      Effect.mapError(mapError)
    )
  const streamText = (options: any) =>
    Stream.suspend(() => {
      let shown = ""
      let calledTool = false
      let retried = false
      const diverged = () =>
        new ProviderError(
          {
            module: "Models",
            method: "streamText",
            description: `the connection to ${ctx.provider} dropped mid-response; asked again, it answered differently from the text already shown, so the reply was not used.`
          },
          { disableValidation: true }
        )
      /** One attempt; `repeat`: the text a retry must say again before anything new is passed on. */
      const attempt = (repeat: string): Stream.Stream<any, unknown, any> => {
        let finished = false
        let pending = repeat
        // (made when the stream is cut short, not for every stream: an error takes a stack trace)
        let cutShort: unknown = noCut
        const cut = () => {
          cutShort = incompleteStream(ctx, "streamText")
          return cutShort
        }
        return inner.streamText(options).pipe(
          Stream.mapEffect((part: any) => {
            if (pending !== "") {
              if (part.type === "text-delta") {
                const d: string = part.delta
                if (pending.startsWith(d)) {
                  pending = pending.slice(d.length)
                  return Effect.succeed(undefined)
                }
                if (!d.startsWith(pending)) return Effect.fail(diverged())
                const rest = d.slice(pending.length)
                pending = ""
                if (rest === "") return Effect.succeed(undefined)
                shown += rest
                return Effect.succeed({ ...part, delta: rest })
              }
              if (part.type === "text-end" || part.type === "tool-call" || part.type === "finish") {
                return Effect.fail(diverged())
              }
              return Effect.succeed(undefined) // what the cut attempt passed on already (metadata, starts)
            }
            if (part.type === "text-delta") shown += part.delta
            if (part.type === "tool-call") calledTool = true
            if (part.type === "finish") finished = true
            return Effect.succeed(fixPart(api, part))
          }),
          Stream.filter((part) => part !== undefined),
          Stream.concat(Stream.suspend(() => (finished ? Stream.empty : Stream.fail(cut())))),
          Stream.catchAll((e) => {
            if (retried || calledTool || !isCut(e, cutShort)) return Stream.fail(e)
            retried = true
            return attempt(shown)
          })
        )
      }
      return attempt("").pipe(Stream.mapError((e) => unknownToolError(ctx, "streamText", options, e) ?? mapError(e)))
    })
  return { generateText, generateObject, streamText } as unknown as LanguageModel.Service
}
