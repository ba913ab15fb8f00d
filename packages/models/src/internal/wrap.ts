import { LanguageModel, Response } from "@effect/ai"
import { Effect, Stream } from "effect"
import type { Api } from "../Provider.js"
import { clarify, type ErrorContext, incompleteStream } from "./errors.js"

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

/**
 * Wraps a provider's `LanguageModel` so that its usage has one meaning for all providers, its
 * errors say what happened in one sentence, and a stream that ends without a finish part fails
 * instead of ending quietly.
 */
export const wrap = (api: Api, ctx: ErrorContext, inner: LanguageModel.Service): LanguageModel.Service => {
  const mapError = (e: unknown) => clarify(ctx, e)
  const generateText = (options: any) =>
    inner.generateText(options).pipe(
      Effect.map((response) => new LanguageModel.GenerateTextResponse(response.content.map((p) => fixPart(api, p)))),
      Effect.mapError(mapError)
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
      let finished = false
      return inner.streamText(options).pipe(
        Stream.map((part) => {
          if (part.type === "finish") finished = true
          return fixPart(api, part)
        }),
        Stream.concat(
          Stream.suspend(() => (finished ? Stream.empty : Stream.fail(incompleteStream(ctx, "streamText"))))
        ),
        Stream.mapError(mapError)
      )
    })
  return { generateText, generateObject, streamText } as unknown as LanguageModel.Service
}
