/**
 * The Anthropic model as it was built on `@effect/ai-anthropic`'s `AnthropicLanguageModel` (its
 * Schema-based request encoding and stream decoding), wrapped the same way: the reference that
 * MuseKit's own Messages codec must match, byte for byte on the wire and part for part in the
 * response.
 *
 * @example
 * ```ts
 * const r = Either.getOrThrow(Models.resolve("anthropic/claude-sonnet-4-5", options))
 * const old = yield* LegacyAnthropic.make(r, options) // LanguageModel.Service; needs HttpClient, Scope
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import { Headers, type HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Scope, Stream } from "effect"
import { prepare } from "../../src/internal/construct.js"
import * as ModelInfo from "../../src/ModelInfo.js"
import type * as Models from "../../src/Models.js"
import { jsonText } from "./streamBodies.js"

const anthropicStreamAsText = (client: AnthropicClient.Service): AnthropicClient.Service => ({
  ...client,
  createMessageStream: (options) =>
    client
      .streamRequest(
        HttpClientRequest.post("/v1/messages", {
          headers: Headers.fromInput({ "anthropic-beta": options.params?.["anthropic-beta"] ?? undefined }),
          body: jsonText({ ...options.payload, stream: true })
        }),
        AnthropicClient.MessageStreamEvent
      )
      .pipe(Stream.takeUntil((event) => event.type === "message_stop"))
})

export const make = (
  r: Models.Resolved,
  options: Models.Options = {}
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const { transform, config, finish } = prepare(r, options)
    config.max_tokens =
      options.maxOutputTokens ?? config.max_tokens ?? Math.min(ModelInfo.maxOutputTokens(r.model), 16_384)
    const client = anthropicStreamAsText(
      yield* AnthropicClient.make({ apiKey: r.apiKey, apiUrl: r.baseUrl, transformClient: transform })
    )
    const inner = yield* AnthropicLanguageModel.make({ model: r.model, config: config as any }).pipe(
      Effect.provideService(AnthropicClient.AnthropicClient, client)
    )
    return finish(inner)
  })
