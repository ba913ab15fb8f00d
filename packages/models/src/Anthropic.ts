/**
 * The Anthropic provider (Messages API) on its own: `@musekit/models/anthropic` loads Anthropic's client
 * and nothing of the other providers. `Models.layer("anthropic/…")` loads this module when it is first
 * used.
 *
 * @example
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * import * as Anthropic from "@musekit/models/anthropic"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(
 *   Effect.provide(Anthropic.layer("claude-sonnet-4-5", { env: process.env }))
 * )
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import { Headers, type HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Layer, type Scope, Stream } from "effect"
import { prepare } from "./internal/construct.js"
import { jsonText } from "./internal/streamBodies.js"
import * as ModelInfo from "./ModelInfo.js"
import * as Models from "./Models.js"

/** The Anthropic client with `createMessageStream` sending its body as text. */
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

/** Builds the model for a resolved `anthropic/…` spec (see `Models.resolve`). */
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

/** The `LanguageModel` layer for an Anthropic model id, over Node's HTTP client. */
export const layer = (
  model: string,
  options: Models.Options = {}
): Layer.Layer<LanguageModel.LanguageModel, Models.ModelConfigError> => Models.layer(`anthropic/${model}`, options)
